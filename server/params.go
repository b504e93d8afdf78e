package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"marspec/generation"
)

// Query and path parameters, each checked into a typed value or a FieldError naming it.

func (s *Server) waitParam(c *gin.Context) (time.Duration, error) {
	v := c.Query("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, nerr := strconv.Atoi(v); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d < 0 || d > s.cfg.MaxWait {
		return 0, &generation.FieldError{Field: "wait", Value: strconv.Quote(v), Allowed: "a duration from 0s to " + s.cfg.MaxWait.String() + " (e.g. 30s)"}
	}
	return d, nil
}

// jobID reads and checks the :id path parameter: a canonical UUID, nothing else reaches the
// store or the file system.
func jobID(c *gin.Context) (string, error) {
	id := c.Param("id")
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return "", &generation.FieldError{Field: "id", Value: strconv.Quote(truncate(id)), Allowed: "a job id (lower-case UUID)", Reason: "malformed"}
	}
	return id, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func intQuery(c *gin.Context, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &generation.FieldError{Field: name, Value: strconv.Quote(truncate(v)), Allowed: fmt.Sprintf("%d to %d", lo, hi)}
	}
	return n, nil
}
