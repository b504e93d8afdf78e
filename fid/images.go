package fid

import (
	"fmt"
	"image"
	"image/color"
	_ "image/png" // PNG decoding for image folders
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ImageFiles lists the PNG files of a folder, sorted; anything else in it is an error, so a
// wrong folder is noticed rather than silently scored.
func ImageFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("image folder %s: %v", dir, err)
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if strings.ToLower(filepath.Ext(e.Name())) != ".png" {
			return nil, fmt.Errorf("image folder %s: %s is not a PNG image (only .png files are allowed)", dir, e.Name())
		}
		files = append(files, filepath.Join(dir, e.Name()))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("image folder %s has no PNG images", dir)
	}
	sort.Strings(files)
	return files, nil
}

// LoadImage reads a PNG and returns its pixels [C][H][W] for an evaluator of the given size.
// Grids (grid.png) and images of another size are refused with the file named.
func LoadImage(path string, height, width, channels int) ([]uint8, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable PNG: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() != width || b.Dy() != height {
		return nil, fmt.Errorf("%s: image is %dx%d, the evaluator needs %dx%d", path, b.Dx(), b.Dy(), width, height)
	}
	out := make([]uint8, channels*height*width)
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			c := img.At(b.Min.X+x, b.Min.Y+y)
			if channels == 1 {
				out[y*width+x] = color.GrayModel.Convert(c).(color.Gray).Y
				continue
			}
			r, g, bl, _ := c.RGBA()
			for ch, v := range []uint32{r, g, bl} {
				out[ch*height*width+y*width+x] = uint8(v >> 8)
			}
		}
	}
	return out, nil
}
