package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCodec runs the codec command as an operator would, without the root
// command, and returns stdout, stderr and the error RunE returned. Usage and
// error printing are silenced as the root command silences them.
func runCodec(t *testing.T, stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	c := newCodecCmd()
	c.SilenceUsage, c.SilenceErrors = true, true
	var out, errOut bytes.Buffer
	c.SetIn(bytes.NewReader(stdin))
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SetArgs(args)
	err = c.Execute()
	return out.Bytes(), errOut.Bytes(), err
}

const codecSample = `{"timestamp":"2025-03-14T09:26:53.000Z","protocol":"modbus","msgId":"v2_Kx7Qm2Za_1",
 "messages":[{"readings":[{"deviceName":"boiler-1","metric":"temperature","value":71.25,"unit":"°C","quality":"GOOD"},
 {"deviceName":"boiler-1","metric":"pressure","value":null,"quality":"BAD","qualityCode":"TIMEOUT","7seg":1}]}]}`

func TestCodecRoundTrip(t *testing.T) {
	canonOut, stderr, err := runCodec(t, []byte(codecSample), "decode", "--compact-output")
	if err != nil {
		t.Fatal(err)
	}
	if string(stderr) != "layers: json\n" || bytes.Count(canonOut, []byte("\n")) != 1 {
		t.Errorf("stdout %q, stderr %q", canonOut, stderr)
	}

	cases := []struct {
		args   []string
		layers string
	}{
		{[]string{"encode", "--format", "msgpack+deflate", "--compact"}, "zlib-deflate → msgpack → key-compaction v1"},
		{[]string{"encode"}, "zlib-deflate → msgpack"}, // the default format
		{[]string{"encode", "--format", "json+deflate", "--raw-deflate", "--level", "9"}, "raw-deflate → json"},
		{[]string{"encode", "--format", "msgpack", "-"}, "msgpack"},
		{[]string{"encode", "--format", "json", "--compact"}, "json → key-compaction v1"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			payload, _, err := runCodec(t, []byte(codecSample), c.args...)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			out, stderr, err := runCodec(t, payload, "decode", "--compact-output")
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if want := "layers: " + c.layers + "\n"; string(stderr) != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			if !bytes.Equal(out, canonOut) {
				t.Errorf("round trip:\n got %s\nwant %s", out, canonOut)
			}
		})
	}
}

func TestCodecFiles(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	bin := filepath.Join(dir, "payload.bin")
	if err := os.WriteFile(in, []byte(codecSample), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runCodec(t, nil, "encode", "--compact", "-o", bin, in)
	if err != nil || len(stdout) != 0 {
		t.Fatalf("encode to file: %v, stdout %q", err, stdout)
	}
	out, stderr, err := runCodec(t, nil, "decode", bin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stderr), "key-compaction v1") {
		t.Errorf("stderr %q", stderr)
	}
	// Pretty by default.
	if !strings.HasPrefix(string(out), "{\n  \"messages\": [") || !strings.Contains(string(out), `"7seg": 1`) {
		t.Errorf("stdout:\n%s", out)
	}
}

func TestCodecErrors(t *testing.T) {
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  []string // substrings of the error
	}{
		{"bad format", codecSample, []string{"encode", "--format", "gzip"},
			[]string{"--format", `"gzip"`, "json, msgpack, json+deflate, msgpack+deflate"}},
		{"garbage", "not a payload", []string{"decode"}, []string{"decode stdin", "malformed"}},
		{"truncated", codecSample[:40], []string{"decode"}, []string{"malformed"}},
		{"empty", "", []string{"decode"}, []string{"empty payload"}},
		{"too large", codecSample, []string{"decode", "--max-input", "10"}, []string{"too large"}},
		{"too deep", strings.Repeat("[", 10) + strings.Repeat("]", 10), []string{"decode", "--max-depth", "5"}, []string{"too deep"}},
		{"missing file", "", []string{"decode", "/nonexistent/payload"}, []string{"/nonexistent/payload"}},
		{"scalar", "[1]", []string{"encode", "--compact"}, []string{"key compaction needs an object"}},
		{"bad level", codecSample, []string{"encode", "--level", "42"}, []string{"deflate level 42"}},
		{"two files", "", []string{"decode", "a", "b"}, []string{"accepts at most 1 arg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, _, err := runCodec(t, []byte(c.stdin), c.args...)
			if err == nil {
				t.Fatalf("no error; stdout %q", stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if len(stdout) != 0 {
				t.Errorf("stdout on error: %q", stdout)
			}
		})
	}
}

func TestCodecHelpShowsDefaults(t *testing.T) {
	out, _, err := runCodec(t, nil, "encode", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`(default "msgpack+deflate")`, "json, msgpack, json+deflate, msgpack+deflate", "(default 4194304)", "(default -1)"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("encode --help lacks %q:\n%s", w, out)
		}
	}
}
