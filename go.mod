module marspec

go 1.26.8

require (
	github.com/disintegration/imaging v1.6.2 // indirect
	github.com/yalue/onnxruntime_go v1.27.0 // indirect
	golang.org/x/image v0.47.0 // indirect
)
