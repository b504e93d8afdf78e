// Package models embeds the default model packs (trained on Fashion-MNIST by scripts/train/train.py,
// exported by scripts/packs/export.py; see docs/models.md) so the binary runs with no flags.
package models

import "embed"

// FS holds target/ and draft/, each a model pack (docs/model-pack.md), and evaluator/, the
// FID/IS evaluator (docs/evaluation.md).
//
//go:embed target draft evaluator
var FS embed.FS
