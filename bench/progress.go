package bench

// Progress hears of each measurement a benchmark finishes; the CLI draws it as a bar or a
// line per run (package progress), a program may leave it out.
type Progress interface {
	Add(n int, what string)
	Done()
}

type silent struct{}

func (silent) Add(int, string) {}
func (silent) Done()           {}

func startProgress(newBar func(total int) Progress, total int) Progress {
	if newBar == nil {
		return silent{}
	}
	return newBar(total)
}
