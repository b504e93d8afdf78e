package server

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

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
	id := strings.TrimSuffix(file, ".png")
	j, err := s.visibleJob(c, imageFile.FindStringSubmatch(file)[1]) // another key's, or expired: 404
	var data []byte
	if err == nil {
		data, err = s.store.ImagePNG(id)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", s.cacheControl(365*24*time.Hour, j.ExpiresAt())+", immutable") // an image id never changes content
	c.Data(http.StatusOK, "image/png", data)
}

func (s *Server) models(c *gin.Context) {
	c.JSON(http.StatusOK, generation.WireModels(s.cat))
}
