package ruletest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// The JUnit XML elements, as CI systems (Jenkins, GitLab, GitHub actions)
// read them: one testsuite per file, one testcase per case, a failure
// element holding the case's failures, one a line.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Time     string      `xml:"time,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		ClassName string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitFailure `xml:"failure,omitempty"`
	}
	junitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

// WriteJUnit writes results as a JUnit XML report named name.
func WriteJUnit(w io.Writer, name string, results []FileResult) error {
	out := junitSuites{Name: name}
	var total time.Duration
	for _, f := range results {
		s := junitSuite{Name: f.File, Tests: len(f.Cases), Failures: f.Failed()}
		var d time.Duration
		for _, c := range f.Cases {
			d += c.Duration
			jc := junitCase{Name: c.Name, ClassName: f.File, Time: seconds(c.Duration)}
			if !c.Passed() {
				lines := make([]string, len(c.Failures))
				for i, fl := range c.Failures {
					lines[i] = fl.String()
				}
				jc.Failure = &junitFailure{
					Message: fmt.Sprintf("%d of the case's expectations failed; first: %s", len(c.Failures), lines[0]),
					Type:    "expectation",
					Text:    strings.Join(lines, "\n"),
				}
			}
			s.Cases = append(s.Cases, jc)
		}
		s.Time = seconds(d)
		total += d
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Suites = append(out.Suites, s)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.3f", d.Seconds())
}
