package scoring

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// A configuration run at reduced precision (precision=int8) has a twin in the same runs: the
// same text without the key, at fp32. The two share every per-image noise, so their FIDs differ
// by the quantisation's effect alone, far less noisily than the floor allows for two
// different samplers. Precision is meant as a free speed-up: a reduced-precision point whose
// FID is measurably worse than its twin's is shown, but leaves the frontier (its Pareto mark,
// the recommendation and marspec tune's choices), which the floor alone would let it join.

// twinSignificance is the one-sided level at which a reduced-precision point counts as worse
// than its twin (a paired t-test over the seeds).
const twinSignificance = 0.05

var precisionKey = regexp.MustCompile(`:precision=([a-z0-9]+)`)

// fp32Twin is the configuration text cfg runs at fp32, and whether cfg names a reduced precision.
func fp32Twin(cfg string) (string, bool) {
	m := precisionKey.FindStringSubmatch(cfg)
	if m == nil || m[1] == "fp32" {
		return "", false
	}
	return strings.Replace(cfg, m[0], "", 1), true
}

// compareTwins fills VsFP32 and WorseThanFP32 of the reduced-precision rows measured at every
// seed beside their twin.
func compareTwins(rep *PairedReport) {
	at := map[string]int{}
	for i, r := range rep.Rows {
		at[r.Config] = i
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		twin, ok := fp32Twin(r.Config)
		j, found := at[twin]
		if !ok || !found || len(r.FID) != len(rep.Seeds) || len(rep.Rows[j].FID) != len(rep.Seeds) {
			continue
		}
		var d []float64
		for _, s := range rep.Seeds {
			d = append(d, r.FID[s]-rep.Rows[j].FID[s])
		}
		mean, worse := pairedWorse(d, twinSignificance)
		r.VsFP32, r.WorseThanFP32 = &mean, worse
	}
}

// pairedWorse is the mean of the differences d and whether it is above 0 at one-sided level
// alpha by Student's t over len(d)-1 degrees of freedom (identical differences above 0 count
// as worse).
func pairedWorse(d []float64, alpha float64) (float64, bool) {
	if len(d) < 2 {
		return stat.Mean(d, nil), false
	}
	mean, sd := stat.MeanStdDev(d, nil)
	if mean <= 0 {
		return mean, false
	}
	n := float64(len(d))
	se := sd / math.Sqrt(n)
	if se == 0 {
		return mean, true
	}
	crit := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(1 - alpha)
	return mean, mean/se > crit
}

// twinNote says which reduced-precision rows left the frontier, for the report.
func twinNote(rep *PairedReport) string {
	var b strings.Builder
	for _, r := range rep.Rows {
		if r.VsFP32 == nil {
			continue
		}
		verdict := "no measurable cost: a frontier point"
		if r.WorseThanFP32 {
			verdict = fmt.Sprintf("measurably worse (one-sided paired t-test at %g over %d seeds): off the frontier", twinSignificance, len(rep.Seeds))
		}
		fmt.Fprintf(&b, "- `%s`: %s FID against its fp32 twin, %s\n", r.Config, signedText(*r.VsFP32), verdict)
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nReduced precision against the same configuration at fp32 (same seeds):\n" + b.String()
}
