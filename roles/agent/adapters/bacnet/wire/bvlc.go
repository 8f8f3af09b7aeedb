package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// BVLC functions of BACnet/IP (Annex J.2).
const (
	BVLCResult                       = 0x00
	BVLCForwardedNPDU                = 0x04
	BVLCRegisterForeignDevice        = 0x05
	BVLCDistributeBroadcastToNetwork = 0x09
	BVLCOriginalUnicastNPDU          = 0x0A
	BVLCOriginalBroadcastNPDU        = 0x0B

	bvlcType = 0x81
)

// MaxFrame is the largest BACnet/IP datagram: a 1476-octet APDU with the
// NPDU and Forwarded-NPDU headers.
const MaxFrame = 1497

// BVLC is a decoded BACnet Virtual Link Control message.
type BVLC struct {
	Function uint8
	// Origin is the original sender of a Forwarded-NPDU.
	Origin netip.AddrPort
	// Result is the code of a BVLC-Result; 0 is success.
	Result uint16
	// TTL is the time-to-live of a Register-Foreign-Device, in seconds.
	TTL uint16
	// NPDU is the payload of the NPDU-carrying functions.
	NPDU []byte
}

// BVLC-Result codes the client acts on.
const (
	ResultSuccessful               = 0x0000
	ResultRegisterForeignDeviceNAK = 0x0030
	ResultDistributeBroadcastNAK   = 0x0060
)

// DecodeBVLC decodes one datagram. The length field must match the
// datagram, so a truncated or padded frame is rejected.
func DecodeBVLC(b []byte) (BVLC, error) {
	if len(b) < 4 {
		return BVLC{}, ErrTruncated
	}
	if b[0] != bvlcType {
		return BVLC{}, fmt.Errorf("bacnet: BVLC type 0x%02x is not BACnet/IP", b[0])
	}
	if l := int(binary.BigEndian.Uint16(b[2:])); l != len(b) {
		return BVLC{}, fmt.Errorf("bacnet: BVLC length %d, datagram %d bytes", l, len(b))
	}
	m := BVLC{Function: b[1]}
	body := b[4:]
	switch m.Function {
	case BVLCResult:
		if len(body) != 2 {
			return BVLC{}, errors.New("bacnet: BVLC-Result of wrong length")
		}
		m.Result = binary.BigEndian.Uint16(body)
	case BVLCRegisterForeignDevice:
		if len(body) != 2 {
			return BVLC{}, errors.New("bacnet: Register-Foreign-Device of wrong length")
		}
		m.TTL = binary.BigEndian.Uint16(body)
	case BVLCForwardedNPDU:
		if len(body) < 6 {
			return BVLC{}, ErrTruncated
		}
		m.Origin = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[:4])), binary.BigEndian.Uint16(body[4:6]))
		m.NPDU = body[6:]
	case BVLCOriginalUnicastNPDU, BVLCOriginalBroadcastNPDU, BVLCDistributeBroadcastToNetwork:
		m.NPDU = body
	default:
		return BVLC{}, fmt.Errorf("bacnet: unsupported BVLC function 0x%02x", m.Function)
	}
	return m, nil
}

// AppendBVLC frames npdu with function fn (one of the NPDU-carrying
// functions other than Forwarded-NPDU).
func AppendBVLC(dst []byte, fn uint8, npdu []byte) []byte {
	dst = append(dst, bvlcType, fn)
	dst = binary.BigEndian.AppendUint16(dst, uint16(4+len(npdu)))
	return append(dst, npdu...)
}

// AppendForwarded frames npdu as a Forwarded-NPDU from origin, as a BBMD
// sends it.
func AppendForwarded(dst []byte, origin netip.AddrPort, npdu []byte) []byte {
	dst = append(dst, bvlcType, BVLCForwardedNPDU)
	dst = binary.BigEndian.AppendUint16(dst, uint16(10+len(npdu)))
	a := origin.Addr().As4()
	dst = append(dst, a[:]...)
	dst = binary.BigEndian.AppendUint16(dst, origin.Port())
	return append(dst, npdu...)
}

// AppendRegisterForeignDevice is a Register-Foreign-Device with ttl in
// seconds.
func AppendRegisterForeignDevice(dst []byte, ttl uint16) []byte {
	return append(dst, bvlcType, BVLCRegisterForeignDevice, 0, 6, byte(ttl>>8), byte(ttl))
}

// AppendResult is a BVLC-Result with code, as a BBMD answers.
func AppendResult(dst []byte, code uint16) []byte {
	return append(dst, bvlcType, BVLCResult, 0, 6, byte(code>>8), byte(code))
}
