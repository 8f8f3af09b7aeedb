package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeplat/edgeplat/core/codec"
)

// newCodecCmd is the operator's view of the wire format: what is this
// payload I captured from the broker, and what would this JSON look like on
// the wire. It uses core/codec exactly as ingestion does, limits included,
// so a payload the CLI refuses is one the cloud refuses too.
func newCodecCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "codec",
		Short: "Decode and encode telemetry payloads as they travel over MQTT",
		Long: `Decode and encode telemetry payloads as they travel over MQTT.

A payload may be DEFLATE-compressed (zlib or raw), JSON or MessagePack, and
key-compacted; decode finds each layer from the bytes alone, as the cloud
does. The wire format is described in docs/codec.md.

Agents publish each endpoint's batches to
i/{tenant}/a/{agent}/endpoints/{endpoint}, where {endpoint} is the
endpoint's mqtt_topic, or its name when it has none, and may contain
slashes; serve-api subscribes to i/+/a/+/endpoints/# (docs/agent.md).`,
	}
	c.AddCommand(newCodecDecodeCmd(), newCodecEncodeCmd())
	return c
}

func newCodecDecodeCmd() *cobra.Command {
	lim := codec.DefaultLimits()
	var oneLine bool
	c := &cobra.Command{
		Use:   "decode [FILE]",
		Short: "Print a payload as JSON, and its layers on stderr",
		Long: `Decode a payload from FILE (or stdin when FILE is absent or "-") and print it
as JSON on stdout, object keys sorted. The layers found are printed on
stderr, for example:

  layers: zlib-deflate → msgpack → key-compaction v1`,
		Example: `  mosquitto_sub -t 'i/+/a/+/endpoints/#' -C 1 -N > payload.bin
  edgeplat codec decode payload.bin`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true // from here on, errors are about the data, not the command line
			name, data, err := readCodecInput(cmd, args, lim)
			if err != nil {
				return err
			}
			d, err := codec.Decode(data, lim)
			if err != nil {
				return fmt.Errorf("decode %s: %w", name, err)
			}
			out, err := d.JSON()
			if err != nil {
				return fmt.Errorf("decode %s: %w", name, err)
			}
			if !oneLine {
				var buf bytes.Buffer
				if err := json.Indent(&buf, out, "", "  "); err != nil {
					return fmt.Errorf("BUG: canonical JSON does not indent: %w", err)
				}
				out = buf.Bytes()
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "layers: %s\n", d.Layers)
			if _, err := cmd.OutOrStdout().Write(append(out, '\n')); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&oneLine, "compact-output", false, "print the JSON on one line")
	addLimitFlags(c, &lim)
	f.IntVar(&lim.MaxDepth, "max-depth", lim.MaxDepth, "refuse payloads nested deeper than this")
	return c
}

func newCodecEncodeCmd() *cobra.Command {
	lim := codec.DefaultLimits()
	var (
		format, output string
		opts           codec.EncodeOptions
	)
	valid := validFormats()
	c := &cobra.Command{
		Use:   "encode [FILE]",
		Short: "Encode JSON into a wire payload",
		Long: `Read JSON from FILE (or stdin when FILE is absent or "-") and write it in the
chosen wire format to stdout, or to the file named by --output. The input may
also be any payload decode accepts, which makes this a transcoder. The top
level must be an object or an array (an object with --compact).

Deflated output is zlib-wrapped unless --raw-deflate is given.`,
		Example: `  echo '{"protocol":"modbus","messages":[]}' | edgeplat codec encode --compact -o payload.bin`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := codec.ParseFormat(format)
			if err != nil {
				return fmt.Errorf("invalid --format %q: valid values are %s", format, valid)
			}
			opts.Format = f
			cmd.SilenceUsage = true
			name, data, err := readCodecInput(cmd, args, lim)
			if err != nil {
				return err
			}
			d, err := codec.Decode(data, lim)
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			out, err := codec.Encode(d.Value, opts)
			if err != nil {
				return fmt.Errorf("encode %s: %w", name, err)
			}
			if output == "" || output == "-" {
				if _, err := cmd.OutOrStdout().Write(out); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				return nil
			}
			if err := os.WriteFile(output, out, 0o644); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&format, "format", string(codec.FormatMsgpackDeflate), "wire format: "+valid)
	fl.BoolVar(&opts.Compact, "compact", false, "apply key compaction (dictionary v"+fmt.Sprint(codec.DictVersion)+")")
	fl.IntVar(&opts.Level, "level", -1, "deflate level: 1 (fastest) to 9 (smallest), -1 default, -2 Huffman only")
	fl.BoolVar(&opts.RawDeflate, "raw-deflate", false, "write a bare RFC 1951 deflate stream instead of zlib")
	fl.StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	addLimitFlags(c, &lim)
	return c
}

func addLimitFlags(c *cobra.Command, lim *codec.Limits) {
	c.Flags().IntVar(&lim.MaxInputSize, "max-input", lim.MaxInputSize, "refuse input larger than this many bytes")
	c.Flags().IntVar(&lim.MaxDecodedSize, "max-decoded", lim.MaxDecodedSize, "refuse payloads that inflate to more than this many bytes")
}

func validFormats() string {
	var names []string
	for _, f := range codec.Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// readCodecInput reads FILE, or stdin when there is no FILE or it is "-",
// without reading past the input limit.
func readCodecInput(cmd *cobra.Command, args []string, lim codec.Limits) (name string, data []byte, err error) {
	var r io.Reader = cmd.InOrStdin()
	name = "stdin"
	if len(args) == 1 && args[0] != "-" {
		name = args[0]
		f, err := os.Open(name)
		if err != nil {
			return name, nil, err
		}
		defer f.Close()
		r = f
	}
	data, err = codec.ReadPayload(r, lim)
	if err != nil {
		return name, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return name, data, nil
}
