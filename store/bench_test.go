package store

import (
	"testing"
	"time"

	"marspec/api"
)

// BenchmarkAddImage times storing one small PNG and its record (the file is synced).
func BenchmarkAddImage(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateJob(Job{ID: "j", Created: time.Now(), Status: api.StatusRunning, Settings: api.Settings{Mode: "target"}}); err != nil {
		b.Fatal(err)
	}
	png := make([]byte, 900)
	b.ResetTimer()
	for i := range b.N {
		if err := s.AddImage(Image{ID: ImageID("j", i), JobID: "j", Index: i}, png); err != nil {
			b.Fatal(err)
		}
	}
}
