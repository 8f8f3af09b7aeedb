package wire

import (
	"encoding/binary"
	"fmt"
)

// NPDU control bits (clause 6.2.2).
const (
	npduNetworkMessage = 0x80
	npduDNET           = 0x20
	npduSNET           = 0x08
	npduExpectingReply = 0x04
)

// NPDU is a decoded network layer header with its APDU.
type NPDU struct {
	// ExpectingReply is set on confirmed requests.
	ExpectingReply bool
	// NetworkMessage is set when the NPDU carries a network layer message
	// (router traffic) rather than an APDU; APDU is then empty.
	NetworkMessage bool
	// SNET and SADR name the remote network and station of an answer that
	// came through a router; the adapter only reports them.
	SNET uint16
	SADR []byte
	APDU []byte
}

// DecodeNPDU decodes the network header. DNET/SNET fields are parsed and
// skipped, since the adapter talks to devices on its own IP network.
func DecodeNPDU(b []byte) (NPDU, error) {
	if len(b) < 2 {
		return NPDU{}, ErrTruncated
	}
	if b[0] != 0x01 {
		return NPDU{}, fmt.Errorf("bacnet: NPDU version %d", b[0])
	}
	ctl := b[1]
	n := NPDU{ExpectingReply: ctl&npduExpectingReply != 0, NetworkMessage: ctl&npduNetworkMessage != 0}
	off := 2
	if ctl&npduDNET != 0 {
		if len(b) < off+3 {
			return NPDU{}, ErrTruncated
		}
		dlen := int(b[off+2])
		off += 3 + dlen
		if len(b) < off {
			return NPDU{}, ErrTruncated
		}
	}
	if ctl&npduSNET != 0 {
		if len(b) < off+3 {
			return NPDU{}, ErrTruncated
		}
		n.SNET = binary.BigEndian.Uint16(b[off:])
		slen := int(b[off+2])
		off += 3
		if slen == 0 || len(b) < off+slen {
			return NPDU{}, fmt.Errorf("bacnet: NPDU source address of %d bytes: %w", slen, ErrTruncated)
		}
		n.SADR = append([]byte(nil), b[off:off+slen]...)
		off += slen
	}
	if ctl&npduDNET != 0 {
		off++ // hop count
		if len(b) < off {
			return NPDU{}, ErrTruncated
		}
	}
	if n.NetworkMessage {
		return n, nil
	}
	n.APDU = b[off:]
	return n, nil
}

// AppendNPDU writes a local NPDU header (no routing) and apdu.
func AppendNPDU(dst []byte, expectingReply bool, apdu []byte) []byte {
	var ctl byte
	if expectingReply {
		ctl |= npduExpectingReply
	}
	return append(append(dst, 0x01, ctl), apdu...)
}
