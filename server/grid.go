package server

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/render"
)

// grid is GET /v1/generations/{id}/grid.png: the job's finished images as one picture, a row
// per class named by the class, as `marspec generate` writes its grid. A running job gives the
// images finished so far; a job with none yet is a 404 that says so.
func (s *Server) grid(c *gin.Context) {
	g, ok := s.jobFromPath(c)
	if !ok {
		return
	}
	id := g.ID
	if len(g.Images) == 0 {
		s.fail(c, notFound(fmt.Sprintf("job %s has no finished images yet (status %s)", id, g.Status)))
		return
	}
	pics := make([]image.Image, 0, len(g.Images))
	classes := make([]int, 0, len(g.Images))
	names := make([]string, 0, len(g.Images))
	for _, im := range g.Images {
		data, err := s.store.ImagePNG(im.ID)
		if err != nil {
			s.fail(c, err)
			return
		}
		pic, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			s.fail(c, fmt.Errorf("stored image %s: %w", im.ID, err))
			return
		}
		pics, classes, names = append(pics, pic), append(classes, im.Class), append(names, im.ClassName)
	}
	data, err := render.EncodePNG(generation.LayoutGrid(pics, classes, names), g.Settings.Params)
	if err != nil {
		s.fail(c, err)
		return
	}
	if g.Status == api.StatusSucceeded { // a finished job's grid never changes
		c.Header("Cache-Control", s.cacheControl(24*time.Hour, g.ExpiresAt))
	}
	c.Header("Content-Disposition", fmt.Sprintf(`inline; filename="%s-grid.png"`, id))
	c.Data(http.StatusOK, "image/png", data)
}
