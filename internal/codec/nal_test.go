package codec

import (
	"fmt"
	"testing"
)

func TestSplitNALs(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want [][]byte
	}{
		{"4- and 3-byte start codes",
			[]byte{0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5},
			[][]byte{{0x67, 1, 2}, {0x68, 3}, {0x65, 4, 5}}},
		{"trailing zero bytes belong to no unit",
			[]byte{0, 0, 1, 0x41, 9, 0, 0, 0, 0, 0, 1, 0x41, 8, 0, 0},
			[][]byte{{0x41, 9}, {0x41, 8}}},
		{"bytes before the first start code are dropped",
			[]byte{7, 7, 0, 0, 1, 0x06, 5},
			[][]byte{{0x06, 5}}},
		{"emulation prevention bytes stay", // 00 00 03 is not a start code
			[]byte{0, 0, 1, 0x65, 0, 0, 3, 1, 2},
			[][]byte{{0x65, 0, 0, 3, 1, 2}}},
		{"empty units are skipped", []byte{0, 0, 1, 0, 0, 1, 0x68, 1}, [][]byte{{0x68, 1}}},
		{"start code at the very end", []byte{0, 0, 1, 0x67, 0, 0, 1}, [][]byte{{0x67}}},
		{"no start code", []byte{1, 2, 3, 4}, nil},
		{"empty", nil, nil},
	}
	for _, tc := range tests {
		if got := SplitNALs(tc.in); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: SplitNALs(% x) = %x, want %x", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestNALType(t *testing.T) {
	tests := []struct {
		nal  []byte
		want int
	}{
		{[]byte{0x67, 0x42}, NALSPS}, {[]byte{0x68}, NALPPS}, {[]byte{0x65}, NALIDR},
		{[]byte{0x41}, NALSlice}, {[]byte{0x06}, NALSEI}, {nil, -1},
	}
	for _, tc := range tests {
		if got := NALType(tc.nal); got != tc.want {
			t.Errorf("NALType(% x) = %d, want %d", tc.nal, got, tc.want)
		}
	}
}
