package webhooks

import (
	"strings"
	"testing"
)

// directBodies are request bodies for the direct path of AppendEvent: the
// first ones it takes, then some it leaves to the decoding path.
var directBodies = []string{
	`{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}`,
	` { "b" : [ 1 , -0 , 0.5 , 1.5e-7 , 1e+21 , 123456789012345 , -123456789012345 ] , "a" : { } , "c" : [ ] } `,
	`{"s":"tab\t nl\n q\" bs\\ sl\/ u\u00e9 \u0001 \u001f \u007f \u2028 \u2029 raw` + "\u2028\u2029" + ` <&> \ud83d\ude00 \ud800 \udc00x \ud800\u0041"}`,
	`{"ab":1,"a":2,"a b":3,"":4,"é":5,"z":{"y":{"x":[{"w":null,"v":true,"u":false}]}}}`,
	`"just a string"`,
	`[{"b":1,"a":2},{"d":[3,{"f":4,"e":5}],"c":6}]`,
	`12`,
	`null`,
	`{"deep":` + strings.Repeat("[", maxDirectDepth-1) + strings.Repeat("]", maxDirectDepth-1) + `}`,
	// The decoding path:
	`{"n":1.0}`,
	`{"n":12345678901234567890}`,
	`{"a":1,"a":2}`,
	`{"a\u0062":1,"ab":2}`,
	`{"deep":` + strings.Repeat("[", maxDirectDepth) + strings.Repeat("]", maxDirectDepth) + `}`,
	`{"a":1}x`,
	`{"a":01}`,
	"{\"a\":\"\xff\"}",
	`{"a":"\x"}`,
	`{"a" 1}`,
	``,
}

func TestCollector_AppendEvent(t *testing.T) {
	t.Parallel()
	for i, config := range directConfigs {
		cfg, err := decodeCollectorConfig([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCollector(cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := i < len(directConfigs)-1; c.direct != want {
			t.Fatalf("template %d: direct %v, want %v", i, c.direct, want)
		}
		for j, body := range directBodies {
			checkAppendEvent(t, c, []byte(body))
			// The bodies before the first decoding-path one must take
			// the direct path: it would otherwise go unchecked.
			if _, ok := c.appendDirect(nil, []byte(body), 1, "t"); c.readsBody && c.direct && ok != (j < 9) {
				t.Errorf("template %d, body %q: direct path %v", i, body, ok)
			}
		}
	}
}

func TestCollector_AppendEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless with the race detector")
	}
	cfg, err := decodeCollectorConfig([]byte(directConfigs[0]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCollector(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(directBodies[0])
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := c.AppendEvent(buf, body, testNow, "t"); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per event, want 0", n)
	}
}

func BenchmarkCollector_AppendEvent(b *testing.B) {
	cfg, err := decodeCollectorConfig([]byte(directConfigs[0]))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *Collector
	}{{"direct", nil}, {"decoding", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := NewCollector(cfg, "")
			if err != nil {
				b.Fatal(err)
			}
			c.direct = tc.name == "direct"
			body := []byte(directBodies[0])
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.AppendEvent(buf, body, testNow, "t"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
