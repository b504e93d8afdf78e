// Package e2e holds end-to-end tests that drive the embedded gallery (web/) in a headless
// Chromium against an in-process server with the embedded ONNX models. It has no code of its
// own; see gallery_test.go and docs/gallery.md.
package e2e
