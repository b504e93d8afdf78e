package fid

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// A scoring run lives in one folder: run.json (its settings), and per configuration a folder
// of chunk records. A chunk is a fixed range of image indices; it is written once, atomically,
// when its images are generated and evaluated, so an interrupted run resumes at the first
// missing chunk, and shards (chunk c belongs to shard c mod n) write disjoint files that merge
// by copying folders together.

// Chunk is the record of one generated and evaluated chunk of images.
type Chunk struct {
	Index    int         `json:"index"`
	Images   []int       `json:"images"`  // image indices
	Classes  []int       `json:"classes"` // requested class of each image
	Seconds  float64     `json:"seconds"` // generation wall time
	Features [][]float64 `json:"features"`
	Probs    [][]float64 `json:"probs"`
	// speculative statistics of the chunk (absent for target/draft-only configurations)
	Drafted        int   `json:"drafted,omitempty"`
	Accepted       int   `json:"accepted,omitempty"`
	AcceptedAtStep []int `json:"accepted_at_step,omitempty"`
	RejectedAtStep []int `json:"rejected_at_step,omitempty"`
}

// ChunkPath is where chunk c of a configuration is stored.
func ChunkPath(runDir, config string, c int) string {
	return filepath.Join(runDir, config, fmt.Sprintf("chunk-%05d.json", c))
}

// WriteChunk stores a chunk atomically (write then rename), so a crash never leaves half a
// record that a resumed run would trust.
func WriteChunk(runDir, config string, ch *Chunk) error {
	path := ChunkPath(runDir, config, ch.Index)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(ch)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// HasChunk reports whether chunk c is already done.
func HasChunk(runDir, config string, c int) bool {
	_, err := os.Stat(ChunkPath(runDir, config, c))
	return err == nil
}

// ReadChunks loads every chunk of a configuration, in chunk order, and says which of the
// expected chunks 0..want-1 are missing.
func ReadChunks(runDir, config string, want int) ([]*Chunk, []int, error) {
	var chunks []*Chunk
	var missing []int
	for c := 0; c < want; c++ {
		data, err := os.ReadFile(ChunkPath(runDir, config, c))
		if os.IsNotExist(err) {
			missing = append(missing, c)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		var ch Chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", ChunkPath(runDir, config, c), err)
		}
		chunks = append(chunks, &ch)
	}
	sort.Slice(chunks, func(i, j int) bool { return chunks[i].Index < chunks[j].Index })
	return chunks, missing, nil
}

// ChunkStats accumulates the features of chunks in order: the same numbers whether the
// chunks came from one run or from shards.
func ChunkStats(chunks []*Chunk, dim int) (*Accumulator, [][]float64, error) {
	acc := NewAccumulator(dim)
	var probs [][]float64
	for _, ch := range chunks {
		for i, f := range ch.Features {
			if err := acc.Add(f); err != nil {
				return nil, nil, fmt.Errorf("chunk %d image %d: %v", ch.Index, ch.Images[i], err)
			}
		}
		probs = append(probs, ch.Probs...)
	}
	return acc, probs, nil
}
