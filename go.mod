module marspec

go 1.26.8

require (
	codeberg.org/sbinet/npyio v0.14.0
	github.com/disintegration/imaging v1.6.2
	github.com/yalue/onnxruntime_go v1.27.0
	gonum.org/v1/gonum v0.17.0
)

require (
	github.com/nlpodyssey/gopickle v0.3.0 // indirect
	golang.org/x/image v0.47.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
