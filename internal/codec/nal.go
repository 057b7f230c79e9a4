package codec

import "bytes"

// NAL unit types (H.264 Table 7-1) that this package's output contains.
const (
	NALSlice = 1 // coded slice of a non-IDR picture (P here: the stream has no B)
	NALIDR   = 5 // coded slice of an IDR picture
	NALSEI   = 6 // x264 writes its version and settings in one on the first IDR
	NALSPS   = 7
	NALPPS   = 8
)

// SplitNALs cuts an Annex-B byte stream at its start codes (00 00 01 or
// 00 00 00 01) and returns the NAL units without them, in order. The units
// share annexB's memory. Bytes before the first start code and zero bytes
// between a unit and the next start code (trailing_zero_8bits, which include
// the first byte of a 4-byte start code) belong to no unit and are dropped.
func SplitNALs(annexB []byte) [][]byte {
	var nals [][]byte
	startCode := []byte{0, 0, 1}
	i := bytes.Index(annexB, startCode)
	for i >= 0 {
		start := i + 3
		next := bytes.Index(annexB[start:], startCode)
		end := len(annexB)
		if next >= 0 {
			end = start + next
		}
		unit := bytes.TrimRight(annexB[start:end], "\x00")
		if len(unit) > 0 {
			nals = append(nals, unit)
		}
		if next < 0 {
			break
		}
		i = start + next
	}
	return nals
}

// NALType is the nal_unit_type of a NAL unit without its start code (1
// non-IDR slice, 5 IDR slice, 7 SPS, 8 PPS, ...), or -1 for an empty one.
func NALType(nal []byte) int {
	if len(nal) == 0 {
		return -1
	}
	return int(nal[0] & 0x1f)
}
