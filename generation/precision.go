package generation

import (
	"strconv"

	"marspec/mar"
)

// checkPrecision checks the catalog's precision (what its packs are opened at) against the
// pack that will run at it, and returns its name (mar.FP32 for ""). Like every setting it
// is a FieldError naming what is allowed; a pack without the graphs is named with how to add
// them.
func checkPrecision(precision, packName string, man *mar.Manifest) (string, error) {
	p, err := mar.ParsePrecision(precision)
	if err != nil {
		return "", fieldErr("precision", strconv.Quote(precision), mar.PrecisionNames(), "unknown")
	}
	if man != nil && !man.HasPrecision(p) {
		return "", fieldErr("precision", p, mar.FP32+", or a pack with "+p+" graphs ("+mar.QuantizeHint+")",
			"pack "+packName+" ("+man.Name+") has no "+p+" graphs")
	}
	return p, nil
}
