// Package web is the gallery: static files embedded in the binary, served by the server at /
// (index.html) and /ui/ (scripts and styles). It needs no network: no CDN, no fonts, no
// external scripts; plain HTML, CSS and JavaScript with no build step.
package web

import "embed"

// FS holds index.html, the scripts and the style sheet.
//
//go:embed index.html *.js *.css
var FS embed.FS
