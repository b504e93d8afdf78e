package remote

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"strconv"

	"marspec/api"
	"marspec/generation"
	"marspec/render"
)

// DrawPictures draws, from a finished job's images written to files, the grid at grid and the
// acceptance map at heatmap ("" = not wanted), as a local run draws them: rows named by class,
// the map titled, both carrying the job's parameters.
func DrawPictures(job *api.Generation, files []string, grid, heatmap string) error {
	if grid != "" {
		pics := make([]image.Image, 0, len(files))
		for _, f := range files {
			pic, err := readPNG(f)
			if err != nil {
				return err
			}
			pics = append(pics, pic)
		}
		if err := render.WritePNG(grid, generation.LayoutGrid(pics, job.Settings.Classes, job.Settings.ClassNames), job.Settings.Params); err != nil {
			return err
		}
	}
	if heatmap != "" {
		rates, h, w, ok := generation.WireAcceptanceRates(job.Images)
		if !ok {
			return &generation.FieldError{Field: "heatmap", Value: strconv.Quote(heatmap), Reason: "the server's job has no acceptance statistics"}
		}
		pic := generation.HeatmapPicture(rates, h, w, job.Settings.Classes, job.Settings.ClassNames, job.Settings.Params)
		if err := render.WritePNG(heatmap, pic, job.Settings.Params); err != nil {
			return err
		}
	}
	return nil
}

func readPNG(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pic, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return pic, nil
}
