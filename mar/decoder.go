package mar

import (
	"fmt"
	"path"
	"strings"

	"marspec/onnxrt"
)

// TokenizerVAEDecoder is the manifest tokenizer kind whose tokens are VAE latents, turned into
// pixels by an ONNX decoder graph in the pack (scripts/packs/export_mar.py writes one for MAR's
// KL-16 VAE). There is no encoder: marspec only generates.
const TokenizerVAEDecoder = "vae_decoder"

// ONNXDecoder runs a pack's decoder graph: tokens [B, L, D] -> image [B, C, H, W] with values
// in [-1, 1]. The graph does everything model-specific (latent scale, unpatchify, the VAE), so
// the Go side only converts to bytes as the pixel tokenizer does.
type ONNXDecoder struct {
	*onnxrt.Graph
	source                               string
	seqLen, dim, channels, height, width int
}

// NewONNXDecoder opens a decoder graph and checks its input and output against the manifest.
func NewONNXDecoder(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXDecoder, error) {
	return newONNXDecoder(data, "", m, opt, source)
}

// newONNXDecoder opens the graph from file when it is set.
func newONNXDecoder(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXDecoder, error) {
	if len(data) == 0 && file == "" {
		return nil, fmt.Errorf("%s: decoder graph is empty or was not read", source)
	}
	L, D := int64(m.SeqLen()), int64(m.TokenDim)
	C, H, W := int64(m.Image.Channels), int64(m.Image.Height), int64(m.Image.Width)
	g, err := openGraph(data, file, source, opt,
		[]onnxrt.IOSpec{{Name: "tokens", Shape: []int64{-1, L, D}}},
		[]onnxrt.IOSpec{{Name: "image", Shape: []int64{-1, C, H, W}}})
	if err != nil {
		return nil, err
	}
	return &ONNXDecoder{Graph: g, source: source, seqLen: int(L), dim: int(D), channels: int(C), height: int(H), width: int(W)}, nil
}

// DecodeImages decodes n images ([n*L*D] tokens) in one graph call and returns each image's
// 8-bit pixels, channel-major [C][H][W].
func (d *ONNXDecoder) DecodeImages(tokens []float32, n int) ([][]uint8, error) {
	per := d.seqLen * d.dim
	if n < 1 || len(tokens) != n*per {
		return nil, fmt.Errorf("%s: got %d token values for %d images, want %d (L=%d, D=%d per image)",
			d.source, len(tokens), n, n*per, d.seqLen, d.dim)
	}
	npx := d.channels * d.height * d.width
	out := make([]float32, n*npx)
	if err := d.Run(n, [][]float32{out}, tokens); err != nil {
		return nil, err
	}
	images := make([][]uint8, n)
	for i := range images {
		px := make([]uint8, npx)
		for j, v := range out[i*npx : (i+1)*npx] {
			px[j] = toByte(v)
		}
		images[i] = px
	}
	return images, nil
}

// Decode implements Tokenizer for one image. The Tokenizer interface has no error result
// (fixed tokenizers cannot fail), and Open has already checked the graph's shapes, so a failure
// here is the runtime itself failing (out of memory, a lost device): it panics with the cause
// rather than hand back an image that is silently wrong. Callers that can handle the error
// use DecodeImages.
func (d *ONNXDecoder) Decode(tokens []float32) []uint8 {
	images, err := d.DecodeImages(tokens, 1)
	if err != nil {
		panic(fmt.Sprintf("vae decoder failed: %v", err))
	}
	return images[0]
}

// isPackFileName reports whether name is a plain .onnx file name inside the pack folder (no
// folders, so a manifest cannot point outside its pack).
func isPackFileName(name string) bool {
	return name != "" && name == path.Base(name) && !strings.ContainsRune(name, '\\') &&
		strings.HasSuffix(name, ".onnx")
}
