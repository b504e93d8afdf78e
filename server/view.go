package server

import (
	"marspec/api"
	"marspec/store"
)

// A job as the wire shows it: stored state, images, and live progress while it runs.

// view assembles a job from the store and, while it runs, its live progress.
func (s *Server) view(id string) (api.Generation, error) {
	j, err := s.store.Job(id)
	if err != nil {
		return api.Generation{}, err
	}
	imgs, err := s.store.Images(id)
	if err != nil {
		return api.Generation{}, err
	}
	g := s.wire(j, imgs)
	return g, s.addDeliveries(&g)
}

// wire is a stored job as the API shows it: images, overall alpha and progress (live while
// the job runs, counted from its stored images otherwise).
func (s *Server) wire(j store.Job, imgs []store.Image) api.Generation {
	g := api.Generation{ID: j.ID, Status: j.Status, Error: j.Error, Created: j.Created, Started: j.Started, Finished: j.Finished,
		Settings: j.Settings, Images: []api.Image{},
		Links: api.Links{Self: "/v1/generations/" + j.ID, Events: "/v1/generations/" + j.ID + "/events",
			Grid: "/v1/generations/" + j.ID + "/grid.png"}}
	wireRetention(&g, j)
	if j.Started != nil && j.Finished != nil {
		g.Seconds = j.Finished.Sub(*j.Started).Seconds()
	}
	wireHosted(&g, j)
	drafted, accepted := 0, 0
	for _, im := range imgs {
		g.Images = append(g.Images, wireImage(im))
		if im.Stats != nil {
			drafted += im.Stats.Drafted
			accepted += im.Stats.Accepted
		}
	}
	if drafted > 0 {
		a := float64(accepted) / float64(drafted)
		g.Alpha = &a
	}
	total := len(j.Settings.Classes)
	L := 0
	if p, ok := s.hub.progress(j.ID); ok {
		g.Progress = p
		g.Progress.ImagesDone = max(p.ImagesDone, len(imgs))
	} else {
		if total > 0 && s.cat.Target != nil {
			L = s.cat.Target.SeqLen()
		}
		g.Progress = api.Progress{ImagesDone: len(imgs), ImagesTotal: total, TokensDone: len(imgs) * L, TokensTotal: total * L}
		g.Progress.Fraction = float64(len(imgs)) / float64(max(1, total))
	}
	return g
}

func wireImage(im store.Image) api.Image {
	return api.Image{ID: im.ID, Index: im.Index, Class: im.Class, ClassName: im.ClassName,
		URL: "/v1/images/" + im.ID + ".png", Seconds: im.Seconds, Stats: im.Stats}
}
