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

// ImageFiles lists the PNG files of a folder, sorted; other files (a README, a grid's
// notes) are skipped, and ListImages names them so a command can say so.
func ImageFiles(dir string) ([]string, error) {
	files, _, err := ListImages(dir)
	return files, err
}

// ListImages splits a folder's files into its PNG images (sorted) and the others (hidden files
// and subfolders are neither); a folder without images is an error naming it.
func ListImages(dir string) (images, others []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("image folder %s: %v", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if strings.ToLower(filepath.Ext(e.Name())) != ".png" {
			others = append(others, e.Name())
			continue
		}
		images = append(images, filepath.Join(dir, e.Name()))
	}
	if len(images) == 0 {
		return nil, others, fmt.Errorf("image folder %s has no PNG images", dir)
	}
	sort.Strings(images)
	return images, others, nil
}

// LoadImage reads a PNG and returns its pixels [C][H][W] for an evaluator of the given size.
// Grids (grid.png) and images of another size are refused with the file named.
func LoadImage(path string, height, width, channels int) ([]uint8, error) {
	im, err := ReadImage(path, channels)
	if err != nil {
		return nil, err
	}
	if im.Width != width || im.Height != height {
		return nil, fmt.Errorf("%s: image is %dx%d, the evaluator needs %dx%d", path, im.Width, im.Height, width, height)
	}
	return im.Pix, nil
}

// ReadImage reads a PNG at its own size with 1 channel (grey) or 3 (RGB; a grey PNG gives
// three equal channels, alpha is dropped).
func ReadImage(path string, channels int) (Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return Image{}, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return Image{}, fmt.Errorf("%s: not a readable PNG: %v", path, err)
	}
	b := img.Bounds()
	height, width := b.Dy(), b.Dx()
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
	return Image{Pix: out, Height: height, Width: width, Channels: channels}, nil
}
