package robustness

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var flagCheck = flag.String("robustness.check", "",
	"history.jsonl of an earlier run: TestCheckHistory checks it again and prints the operations of each partition that is not linearizable")

// ReadHistory reads a history written by History.WriteFile.
func ReadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// TestCheckHistory checks a saved history again (-robustness.check),
// key by key for the findings, and prints the operations of every key
// whose history is not linearizable.
func TestCheckHistory(t *testing.T) {
	if *flagCheck == "" {
		t.Skip("no -robustness.check history")
	}
	ops, err := ReadHistory(*flagCheck)
	if err != nil {
		t.Fatal(err)
	}
	byKey := make(map[string][]Op)
	for _, op := range ops {
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	for key, kops := range byKey {
		model := FindingModel
		if key == "config" {
			model = ConfigModel
		}
		res := porcupine.CheckOperationsTimeout(model, Porcupine(kops), time.Minute)
		if res == porcupine.Ok {
			continue
		}
		t.Errorf("key %q: %s", key, res)
		for _, op := range kops {
			b, _ := json.Marshal(op)
			t.Logf("%s", b)
		}
	}
}
