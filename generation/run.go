package generation

import (
	"context"
	"time"

	"marspec/arsampler"
)

// Run makes every image of plan in this goroutine, at most maxBatch in flight (0 = all): the
// direct path for the CLI. The service runs plans through the scheduler instead, which merges
// requests; both give the same images.
func Run(ctx context.Context, plan Plan, models Models, maxBatch int) ([]Image, error) {
	m, err := models.Model(plan.Pack)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if plan.Spec == nil {
		opt := plan.Options
		opt.Batch = maxBatch
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		imgs, err := m.Generate(plan.Classes, opt)
		if err != nil {
			return nil, err
		}
		out := make([]Image, len(imgs))
		for i, im := range imgs {
			out[i] = Image{Index: im.Index, Class: im.Class, Pixels: im.Pixels, Seconds: time.Since(start).Seconds()}
		}
		return out, nil
	}
	d, err := models.Model(plan.DraftPack)
	if err != nil {
		return nil, err
	}
	res, _, err := arsampler.Generate(m, d, *plan.Spec, plan.Classes, 0, maxBatch)
	if err != nil {
		return nil, err
	}
	out := make([]Image, len(res))
	for i, r := range res {
		st := r.Stats
		out[i] = Image{Index: r.Index, Class: r.Class, Pixels: r.Pixels, Spec: &st, Seconds: time.Since(start).Seconds()}
	}
	return out, nil
}

// CatalogFor builds a catalog from opened models.
func CatalogFor(models Models, targetPack, draftPack, provider string, maxImages int) (Catalog, error) {
	cat := Catalog{TargetPack: targetPack, DraftPack: draftPack, MaxImages: maxImages, Provider: provider}
	t, err := models.Model(targetPack)
	if err != nil {
		return cat, err
	}
	cat.Target = t.Manifest
	if draftPack != "" {
		d, err := models.Model(draftPack)
		if err != nil {
			return cat, err
		}
		cat.Draft = d.Manifest
	}
	return cat, nil
}
