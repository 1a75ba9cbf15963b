package webhooks

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// DefaultMaxPayloadSize is the request body limit of a webhook whose file has
// no max_payload_size: 5 MiB.
const DefaultMaxPayloadSize int64 = 5 << 20

var errSize = errors.New("must be a positive whole number of bytes, optionally followed by k, m or g (binary: 1k = 1024)")

// sizeUnit returns the factor of an accepted unit suffix, or 0.
func sizeUnit(suffix string) int64 {
	switch strings.ToLower(suffix) {
	case "":
		return 1
	case "k", "kb", "kib":
		return 1 << 10
	case "m", "mb", "mib":
		return 1 << 20
	case "g", "gb", "gib":
		return 1 << 30
	}
	return 0
}

// ParseSize parses a byte size written as ASCII digits followed by an
// optional binary unit: k, kb or kib (1024), m, mb or mib (1024²), g, gb or
// gib (1024³), in any letter case. There is no sign, fraction, or space. The
// result must be positive and fit in an int64. Examples: "12345", "2m",
// "512KiB".
func ParseSize(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errSize
	}
	unit := sizeUnit(s[i:])
	if unit == 0 {
		return 0, errSize
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, errSize
	}
	return n * unit, nil
}
