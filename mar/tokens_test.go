package mar

import "testing"

func TestSpaceToDepthRoundTrip(t *testing.T) {
	s := SpaceToDepth{Patch: 4, GridH: 7, GridW: 7, Channels: 1}
	px := make([]uint8, 28*28)
	for i := range px {
		px[i] = uint8((i * 37) % 256)
	}
	tok := s.Encode(px)
	// pixel (row 5, col 9) lives in grid cell (1,2), offset (1,1) inside the patch
	if got, want := tok[(1*7+2)*16+1*4+1], float32(px[5*28+9])/127.5-1; got != want {
		t.Fatalf("layout: got %v want %v", got, want)
	}
	back := s.Decode(tok)
	for i := range px {
		if back[i] != px[i] {
			t.Fatalf("pixel %d: %d != %d", i, back[i], px[i])
		}
	}
}
