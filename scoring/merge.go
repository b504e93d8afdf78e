package scoring

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
)

// Merge copies the chunk records of shard run folders (each made with --shard i/n of the same
// settings) into one run folder out and reports it there.
func Merge(m Models, out string, shards []string, evaluator, reference string, w io.Writer) error {
	var s *Settings
	for _, shard := range shards {
		data, err := os.ReadFile(filepath.Join(shard, "run.json"))
		if err != nil {
			return fmt.Errorf("%s is not a run folder: %v", shard, err)
		}
		var cur Settings
		if err := json.Unmarshal(data, &cur); err != nil {
			return err
		}
		if s != nil && !reflect.DeepEqual(*s, cur) {
			return fmt.Errorf("%s was run with other settings than %s", shard, shards[0])
		}
		s = &cur
		files, _ := filepath.Glob(filepath.Join(shard, "*", "chunk-*.json"))
		sort.Strings(files)
		for _, f := range files {
			rel, _ := filepath.Rel(shard, f)
			dst := filepath.Join(out, rel)
			if _, err := os.Stat(dst); err == nil {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
		}
	}
	gens, ev, err := openRun(m, out, *s, evaluator, "auto")
	if err != nil {
		return err
	}
	return reportRun(out, *s, gens, ev, reference, w)
}
