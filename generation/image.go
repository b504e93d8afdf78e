package generation

import (
	"fmt"
	"image"

	"marspec/api"
	"marspec/arsampler"
	"marspec/render"
)

// Image is one finished image of a plan.
type Image struct {
	Index, Class int
	Pixels       []uint8               // [C][H][W]
	Spec         *arsampler.ImageStats // spec mode only
	Seconds      float64               // from the job's start
}

// PNG encodes img with the plan's provenance in its "parameters" tEXt chunk.
func (p Plan) PNG(img Image) ([]byte, error) {
	if img.Index < 0 || img.Index >= len(p.Classes) {
		return nil, fmt.Errorf("image index %d out of the plan's %d images", img.Index, len(p.Classes))
	}
	h, w, c := p.ImageHWC[0], p.ImageHWC[1], p.ImageHWC[2]
	pic, err := render.FromPixels(img.Pixels, h, w, c)
	if err != nil {
		return nil, err
	}
	return render.EncodePNG(pic, p.ImageParams(img))
}

// Picture is img as an image.Image.
func (p Plan) Picture(img Image) (image.Image, error) {
	return render.FromPixels(img.Pixels, p.ImageHWC[0], p.ImageHWC[1], p.ImageHWC[2])
}

// WireStats converts an image's speculative statistics for the API (nil outside spec mode).
func (p Plan) WireStats(img Image) *api.ImageStats {
	s := img.Spec
	if s == nil {
		return nil
	}
	return &api.ImageStats{Alpha: s.Alpha(), Drafted: s.Drafted, Accepted: s.Accepted, Resampled: s.Resampled,
		Bonus: s.Bonus, Prefilled: s.Prefilled, Rounds: s.Rounds, GridHeight: p.GridH, GridWidth: p.GridW,
		AcceptedAtStep: s.AcceptedAtStep, RejectedAtStep: s.RejectedAtStep,
		AcceptedAtPos: s.AcceptedAtPos, RejectedAtPos: s.RejectedAtPos}
}
