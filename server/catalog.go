package server

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"marspec/generation"
)

// Read-only resources: image files and the model catalog.

var imageFile = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-([0-9]{1,5})\.png$`)

func (s *Server) image(c *gin.Context) {
	file := c.Param("file")
	if !imageFile.MatchString(file) {
		s.fail(c, &generation.FieldError{Field: "id", Value: strconv.Quote(truncate(file)), Allowed: "JOBID-INDEX.png", Reason: "malformed image name"})
		return
	}
	data, err := s.store.ImagePNG(strings.TrimSuffix(file, ".png"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "public, max-age=31536000, immutable") // an image id never changes content
	c.Data(http.StatusOK, "image/png", data)
}

func (s *Server) models(c *gin.Context) {
	c.JSON(http.StatusOK, generation.WireModels(s.cat))
}
