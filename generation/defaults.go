package generation

// DefaultPreset is the preset a request runs with when it names neither a preset nor a mode:
// the one place the defaults of `marspec generate` and of the service are chosen. Empty means
// no preset: speculative decoding with the built-in defaults (gamma 8, prefill 5%, prefix
// verification, the paper's criterion, aligned noise). Set it to a name in Presets to make a
// point of the measured frontier the default; explicit settings still win over it.
const DefaultPreset = "fast"
