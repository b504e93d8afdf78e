package generation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"marspec/mar"
)

// ParsePrecisions reads a server's --precisions (comma-separated names) into the list requests
// may name; "" is nil, every precision a pack has graphs for. The default precision, which
// requests naming none run at, must be among them.
func ParsePrecisions(list, def string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		p, err := mar.ParsePrecision(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if def, _ = mar.ParsePrecision(def); !slices.Contains(out, def) {
		return nil, fmt.Errorf("%q leaves out %s, the precision of requests that name none (--precision)", list, def)
	}
	return out, nil
}

// PackPrecisions are the precisions pack man can run at that the catalog serves on its
// provider (fp16 on CUDA only), in PrecisionNames' order.
func (c Catalog) PackPrecisions(man *mar.Manifest) []string {
	var out []string
	for _, p := range []string{mar.FP32, mar.Int8, mar.FP16} {
		if (man == nil || man.HasPrecision(p)) && (c.Precisions == nil || slices.Contains(c.Precisions, p)) &&
			mar.CheckPrecisionProvider(p, c.Provider) == nil {
			out = append(out, p)
		}
	}
	return out
}

// resolvePrecision is the precision a request runs at on pack packName (its manifest man): its
// own, or the catalog's default when it names none. Like every setting a bad one is a
// FieldError naming what is allowed; a pack without the graphs is named with how to add them.
func resolvePrecision(asked string, cat Catalog, packName string, man *mar.Manifest) (string, error) {
	given := asked != ""
	if !given {
		asked = cat.Precision
	}
	p, err := mar.ParsePrecision(asked)
	if err != nil {
		return "", fieldErr("precision", strconv.Quote(asked), mar.PrecisionNames(), "unknown")
	}
	if err := mar.CheckPrecisionProvider(p, cat.Provider); err != nil {
		return "", fieldErr("precision", p, "omit it, or "+mar.CPUPrecisions+" on the CPU; "+mar.FP16+" with the CUDA provider (--device cuda)",
			"fp16 graphs need ONNX Runtime's CUDA provider and this runs on the CPU")
	}
	if given && cat.Precisions != nil && !slices.Contains(cat.Precisions, p) {
		return "", fieldErr("precision", p, "omit it, or "+strings.Join(cat.PackPrecisions(man), ", "), "this server does not serve "+p+" (its --precisions)")
	}
	if err := checkPackPrecision(p, packName, man); err != nil {
		return "", err
	}
	return p, nil
}

// presetPrecision is the precision preset pre brings to a request on pack man: its own where
// it was measured (int8 on a CPU: the int8 graphs have not been measured on another provider;
// fp16 on CUDA, the only provider that runs it), the catalog serves it and the pack (the draft
// too, in spec mode) has the graphs; "" otherwise, so the request runs at the catalog's default
// and its settings say which.
func presetPrecision(pre Preset, cat Catalog, man *mar.Manifest) string {
	p := pre.Precision
	onCPU := cat.Provider == "" || cat.Provider == "cpu"
	switch {
	case p == "", p == mar.Int8 && !onCPU, !slices.Contains(cat.PackPrecisions(man), p):
		return ""
	case pre.Mode == ModeSpec && cat.Draft != nil && !cat.Draft.HasPrecision(p):
		return ""
	}
	return p
}

// checkPackPrecision says whether pack packName (its manifest man) has the graphs of
// precision p.
func checkPackPrecision(p, packName string, man *mar.Manifest) error {
	if man != nil && !man.HasPrecision(p) {
		return fieldErr("precision", p, mar.FP32+", or a pack with "+p+" graphs ("+mar.PrecisionHint(p)+")",
			"pack "+packName+" ("+man.Name+") has no "+p+" graphs")
	}
	return nil
}
