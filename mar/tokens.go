package mar

import "fmt"

// Tokenizer maps between images and token grids. The embedded packs use a fixed
// space-to-depth tokenizer on pixels; a VAE tokenizer would implement the same interface.
type Tokenizer interface {
	// Decode turns [L*D] tokens into 8-bit pixels laid out channel-major [C][H][W].
	Decode(tokens []float32) []uint8
}

// SpaceToDepth is the fixed patch tokenizer: token[c*p*p + i*p + j] = pixel[c][gy*p+i][gx*p+j],
// pixel values in [-1, 1].
type SpaceToDepth struct {
	Patch, GridH, GridW, Channels int
}

// NewTokenizer builds the tokenizer a manifest names.
func NewTokenizer(m *Manifest) (Tokenizer, error) {
	if m.Tokenizer.Kind != "space_to_depth" {
		return nil, fmt.Errorf("tokenizer %q is not supported (allowed: space_to_depth)", m.Tokenizer.Kind)
	}
	return SpaceToDepth{Patch: m.Tokenizer.Patch, GridH: m.Grid.Height, GridW: m.Grid.Width, Channels: m.Image.Channels}, nil
}

func (s SpaceToDepth) Decode(tokens []float32) []uint8 {
	p, c := s.Patch, s.Channels
	h, w := s.GridH*p, s.GridW*p
	d := c * p * p
	out := make([]uint8, c*h*w)
	for gy := 0; gy < s.GridH; gy++ {
		for gx := 0; gx < s.GridW; gx++ {
			tok := tokens[(gy*s.GridW+gx)*d:]
			for ch := 0; ch < c; ch++ {
				for i := 0; i < p; i++ {
					for j := 0; j < p; j++ {
						v := tok[ch*p*p+i*p+j]
						out[ch*h*w+(gy*p+i)*w+gx*p+j] = toByte(v)
					}
				}
			}
		}
	}
	return out
}

// Encode is Decode's inverse (used by tests and evaluation).
func (s SpaceToDepth) Encode(pixels []uint8) []float32 {
	p, c := s.Patch, s.Channels
	h, w := s.GridH*p, s.GridW*p
	d := c * p * p
	out := make([]float32, s.GridH*s.GridW*d)
	for gy := 0; gy < s.GridH; gy++ {
		for gx := 0; gx < s.GridW; gx++ {
			for ch := 0; ch < c; ch++ {
				for i := 0; i < p; i++ {
					for j := 0; j < p; j++ {
						px := pixels[ch*h*w+(gy*p+i)*w+gx*p+j]
						out[(gy*s.GridW+gx)*d+ch*p*p+i*p+j] = float32(px)/127.5 - 1
					}
				}
			}
		}
	}
	return out
}

func toByte(v float32) uint8 {
	x := (v + 1) * 127.5
	switch {
	case x <= 0:
		return 0
	case x >= 255:
		return 255
	}
	return uint8(x + 0.5)
}
