package ruletest

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// TestWriteJUnit writes a report with passing and failing cases, with
// characters XML escapes, and reads it back with encoding/xml.
func TestWriteJUnit(t *testing.T) {
	t.Parallel()
	results := []FileResult{
		{File: "tests/a.json", Cases: []CaseResult{
			{Name: "passes <&>", Duration: 1500 * time.Microsecond},
			{Name: "fails", Duration: time.Millisecond, Failures: []Failure{
				{Rule: "root/rs/r", Expectation: "match", Expected: "Matched", Got: "NotMatched"},
				{Rule: "root/rs/r", Expectation: "variable v", Expected: `"a<b"`, Got: "\"x\x01y\""},
			}},
		}},
		{File: "tests/b.json", Cases: []CaseResult{{Name: "passes"}}},
	}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, "squall test", results); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Errorf("no XML header:\n%s", buf.String())
	}
	var got struct {
		XMLName  xml.Name `xml:"testsuites"`
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Time     string `xml:"time,attr"`
			Cases    []struct {
				Name      string `xml:"name,attr"`
				ClassName string `xml:"classname,attr"`
				Time      string `xml:"time,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("the report is not well-formed XML: %v\n%s", err, buf.String())
	}
	if got.Name != "squall test" || got.Tests != 3 || got.Failures != 1 || len(got.Suites) != 2 {
		t.Fatalf("report %+v", got)
	}
	a := got.Suites[0]
	if a.Name != "tests/a.json" || a.Tests != 2 || a.Failures != 1 || a.Time != "0.003" || len(a.Cases) != 2 {
		t.Fatalf("suite %+v", a)
	}
	if c := a.Cases[0]; c.Name != "passes <&>" || c.ClassName != "tests/a.json" || c.Time != "0.002" || c.Failure != nil {
		t.Errorf("passing case %+v", c)
	}
	f := a.Cases[1].Failure
	if f == nil || f.Type != "expectation" || !strings.HasPrefix(f.Message, "2 of the case's expectations failed; first: root/rs/r: match:") {
		t.Fatalf("failure %+v", f)
	}
	wantText := "root/rs/r: match: expected Matched, got NotMatched\nroot/rs/r: variable v: expected \"a<b\", got \"x\uFFFDy\""
	if f.Text != wantText {
		t.Errorf("failure text %q, want %q", f.Text, wantText)
	}
}
