package server

import (
	_ "embed"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
)

//go:embed openapi.json
var openapiJSON []byte

func (s *Server) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, v any) {
		s.log.Error("panic", "path", c.Request.URL.Path, "value", v)
		answerError(c, http.StatusInternalServerError, api.ErrorBody{Error: "internal error (logged)"})
	}))
	r.Use(s.observe, s.limitBody)
	r.NoRoute(func(c *gin.Context) { s.fail(c, errNotFound) })
	r.NoMethod(func(c *gin.Context) {
		allowed := allowedMethods(r.Routes(), c.Request.URL.Path)
		c.Header("Allow", strings.Join(allowed, ", "))
		answerError(c, http.StatusMethodNotAllowed, api.ErrorBody{Error: "method " + c.Request.Method +
			" not allowed here (allowed: " + strings.Join(allowed, ", ") + ")"})
	})

	v1 := r.Group("/v1", s.identify)
	v1.POST("/generations", s.auth, s.create)
	v1.GET("/generations", s.list)
	v1.GET("/generations/:id", s.get)
	v1.GET("/generations/:id/events", s.events)
	v1.GET("/generations/:id/grid.png", s.ret.tracked, s.grid)
	v1.DELETE("/generations/:id", s.auth, s.remove)
	v1.GET("/images/:file", s.ret.tracked, s.image)
	v1.GET("/models", s.models)
	v1.GET("/keys", s.listKeys)
	s.openAIRoutes(r)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.ready)
	r.GET("/metrics", gin.WrapH(s.metrics.handler()))
	doc, err := servedOpenAPI(s.cat)
	if err != nil { // the embedded file is tested to parse; keep serving it as it is
		s.log.Error("openapi.json", "err", err)
		doc = openapiJSON
	}
	r.GET("/openapi.json", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", doc) })
	if s.ui != nil {
		ui := http.FS(s.ui)
		r.GET("/", func(c *gin.Context) { c.FileFromFS("/", ui) })
		r.GET("/ui/*file", func(c *gin.Context) { c.FileFromFS(c.Param("file"), ui) })
	}
	return r
}

// observe logs every request with log/slog and counts it by route (the pattern, never the raw
// path: ids would explode the label set).
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Header("X-Content-Type-Options", "nosniff")
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	code := c.Writer.Status()
	s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	s.metrics.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	level := slog.LevelInfo
	if code >= 500 {
		level = slog.LevelError
	}
	s.log.Log(c.Request.Context(), level, "http", "method", c.Request.Method, "route", route, "status", code,
		"ms", time.Since(start).Milliseconds())
}

func (s *Server) limitBody(c *gin.Context) {
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.BodyLimit)
	}
	c.Next()
}

func (s *Server) ready(c *gin.Context) {
	if s.stopping.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "stopping"})
		return
	}
	if err := s.store.Ping(); err != nil {
		s.log.Error("readyz: store", "err", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "store unavailable"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "queue_depth": s.sched.Depth(), "queue_capacity": s.sched.Capacity()})
}

// allowedMethods lists the methods some route serves at path, sorted (the Allow header of a
// 405). gin knows a path matched under another method but does not say which ones.
func allowedMethods(routes gin.RoutesInfo, path string) []string {
	seen := map[string]bool{}
	for _, rt := range routes {
		if routeMatches(rt.Path, path) {
			seen[rt.Method] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// routeMatches reports whether a gin pattern (":name" one segment, "*name" the rest) matches path.
func routeMatches(pattern, path string) bool {
	ps, xs := strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range ps {
		if strings.HasPrefix(p, "*") {
			return true
		}
		if i >= len(xs) || (!strings.HasPrefix(p, ":") && p != xs[i]) {
			return false
		}
	}
	return len(ps) == len(xs)
}
