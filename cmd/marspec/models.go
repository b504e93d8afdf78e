package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
)

func runModels(args []string) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{"target", "draft"}
	}
	for _, name := range names {
		p, err := loadPack(name)
		if err != nil {
			return err
		}
		m := p.Manifest
		var tr struct {
			Parameters int     `json:"parameters"`
			Minutes    float64 `json:"minutes"`
		}
		_ = json.Unmarshal(m.Training, &tr) // free-form record: shown when present
		fmt.Printf("%s (%s): %s\n", name, p.Source, m.Name)
		fmt.Printf("  image %dx%dx%d, tokens %dx%d of dim %d, width %d, %d parameters, trained %.0f min\n",
			m.Image.Height, m.Image.Width, m.Image.Channels, m.Grid.Height, m.Grid.Width, m.TokenDim, m.Width, tr.Parameters, tr.Minutes)
		fmt.Printf("  diffusion: %s, %d training steps, %d sampling steps, %s variance, clip x0 %v\n",
			m.Diffusion.Schedule, m.Diffusion.TrainingSteps, m.Diffusion.SamplingSteps, m.Diffusion.Variance, m.Diffusion.ClipX0)
		classes := make([]string, len(m.Classes))
		for i, c := range m.Classes {
			classes[i] = fmt.Sprintf("%d=%s", i, c)
		}
		fmt.Printf("  classes: %s\n", strings.Join(classes, ", "))
	}
	return nil
}
