package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ArrayAll means "no array index": the whole property.
const ArrayAll = ^uint32(0)

// AppendWhoIs writes a Who-Is service request; low > high or a negative
// low means "all devices".
func AppendWhoIs(dst []byte, low, high int) []byte {
	if low < 0 || high < low {
		return dst
	}
	dst = AppendContextUnsigned(dst, 0, uint64(low))
	return AppendContextUnsigned(dst, 1, uint64(high))
}

// DecodeWhoIs decodes a Who-Is request; ok is false for one without
// limits (every device).
func DecodeWhoIs(b []byte) (low, high uint32, ok bool, err error) {
	if len(b) == 0 {
		return 0, 0, false, nil
	}
	lo, n, err := expectContext(b, 0)
	if err != nil {
		return 0, 0, false, err
	}
	hi, m, err := expectContext(b[n:], 1)
	if err != nil {
		return 0, 0, false, err
	}
	if n+m != len(b) {
		return 0, 0, false, errors.New("bacnet: trailing bytes after Who-Is")
	}
	l, err1 := decodeUnsigned(lo)
	h, err2 := decodeUnsigned(hi)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, false, err
	}
	if l > MaxInstance || h > MaxInstance {
		return 0, 0, false, errors.New("bacnet: Who-Is limit out of range")
	}
	return uint32(l), uint32(h), true, nil
}

// IAm is a decoded I-Am.
type IAm struct {
	Device       ObjectID     `json:"-"`
	MaxAPDU      uint32       `json:"maxApdu"`
	Segmentation Segmentation `json:"-"`
	VendorID     uint32       `json:"vendorId"`
}

// AppendIAm writes an I-Am service request.
func AppendIAm(dst []byte, iam IAm) []byte {
	dst, _ = AppendApp(dst, iam.Device)
	dst, _ = AppendApp(dst, uint64(iam.MaxAPDU))
	dst, _ = AppendApp(dst, Enumerated(iam.Segmentation))
	dst, _ = AppendApp(dst, uint64(iam.VendorID))
	return dst
}

// DecodeIAm decodes an I-Am service request.
func DecodeIAm(b []byte) (IAm, error) {
	var vals [4]any
	off := 0
	for i := range vals {
		v, n, err := DecodeApp(b[off:])
		if err != nil {
			return IAm{}, fmt.Errorf("bacnet: I-Am: %w", err)
		}
		vals[i], off = v, off+n
	}
	id, ok1 := vals[0].(ObjectID)
	maxAPDU, ok2 := vals[1].(uint64)
	seg, ok3 := vals[2].(Enumerated)
	vendor, ok4 := vals[3].(uint64)
	if !ok1 || !ok2 || !ok3 || !ok4 || id.Type != Device || maxAPDU > 1<<16 || seg > 3 || vendor > 1<<16 {
		return IAm{}, fmt.Errorf("bacnet: malformed I-Am %v", vals)
	}
	return IAm{Device: id, MaxAPDU: uint32(maxAPDU), Segmentation: Segmentation(seg), VendorID: uint32(vendor)}, nil
}

// PropertyRef names one property of an object, optionally one array
// element.
type PropertyRef struct {
	ID    PropertyID
	Index uint32 // ArrayAll for the whole property
}

// AppendReadProperty writes a ReadProperty request.
func AppendReadProperty(dst []byte, obj ObjectID, ref PropertyRef) []byte {
	dst = AppendContextObjectID(dst, 0, obj)
	dst = AppendContextUnsigned(dst, 1, uint64(ref.ID))
	if ref.Index != ArrayAll {
		dst = AppendContextUnsigned(dst, 2, uint64(ref.Index))
	}
	return dst
}

// PropertyValue is the answer for one property: its values, or the error
// the device gave for it.
type PropertyValue struct {
	Object ObjectID
	Ref    PropertyRef
	Values []any
	Err    *Error
}

// DecodeReadPropertyAck decodes the payload of a ReadProperty complex ack.
func DecodeReadPropertyAck(b []byte) (PropertyValue, error) {
	pv, off, err := decodeObjectValue(b)
	if err != nil {
		return pv, fmt.Errorf("bacnet: ReadProperty ack: %w", err)
	}
	if off != len(b) {
		return pv, errors.New("bacnet: trailing bytes after ReadProperty ack")
	}
	return pv, nil
}

// decodeObjectValue reads what a ReadProperty ack and a WriteProperty
// request share: [0] object, [1] property, [2] index, [3] values [3].
func decodeObjectValue(b []byte) (PropertyValue, int, error) {
	var pv PropertyValue
	c, off, err := expectContext(b, 0)
	if err != nil || len(c) != 4 {
		return pv, 0, fmt.Errorf("object: %w", errOr(err, "length"))
	}
	pv.Object = objectIDFromRaw(binary.BigEndian.Uint32(c))
	ref, n, err := decodeRef(b[off:], 1, 2)
	if err != nil {
		return pv, 0, err
	}
	pv.Ref, off = ref, off+n
	if n, err = expectBracket(b[off:], 3, true); err != nil {
		return pv, 0, err
	}
	off += n
	vals, n, err := DecodeValues(b[off:], 3)
	if err != nil {
		return pv, 0, fmt.Errorf("%s %s: %w", pv.Object, pv.Ref.ID, err)
	}
	pv.Values, off = vals, off+n
	if n, err = expectBracket(b[off:], 3, false); err != nil {
		return pv, 0, err
	}
	return pv, off + n, nil
}

func errOr(err error, what string) error {
	if err != nil {
		return err
	}
	return errors.New("bad " + what)
}

// decodeRef reads a property identifier (context tag idTag) and an
// optional array index (context tag indexTag).
func decodeRef(b []byte, idTag, indexTag uint8) (PropertyRef, int, error) {
	ref := PropertyRef{Index: ArrayAll}
	c, off, err := expectContext(b, idTag)
	if err != nil {
		return ref, 0, err
	}
	id, err := decodeUnsigned(c)
	if err != nil || id > 1<<22 {
		return ref, 0, fmt.Errorf("property identifier: %w", errOr(err, "value"))
	}
	ref.ID = PropertyID(id)
	if peekContext(b[off:], indexTag) {
		c, n, err := expectContext(b[off:], indexTag)
		if err != nil {
			return ref, 0, err
		}
		idx, err := decodeUnsigned(c)
		if err != nil || idx >= uint64(ArrayAll) {
			return ref, 0, fmt.Errorf("array index: %w", errOr(err, "value"))
		}
		ref.Index, off = uint32(idx), off+n
	}
	return ref, off, nil
}

// ReadAccessSpec is one object of a ReadPropertyMultiple request.
type ReadAccessSpec struct {
	Object ObjectID
	Props  []PropertyRef
}

// AppendReadPropertyMultiple writes a ReadPropertyMultiple request.
func AppendReadPropertyMultiple(dst []byte, specs []ReadAccessSpec) []byte {
	for _, s := range specs {
		dst = AppendContextObjectID(dst, 0, s.Object)
		dst = AppendOpening(dst, 1)
		for _, p := range s.Props {
			dst = AppendContextUnsigned(dst, 0, uint64(p.ID))
			if p.Index != ArrayAll {
				dst = AppendContextUnsigned(dst, 1, uint64(p.Index))
			}
		}
		dst = AppendClosing(dst, 1)
	}
	return dst
}

// DecodeReadPropertyMultipleAck decodes the payload of a
// ReadPropertyMultiple complex ack into one PropertyValue per property, in
// the order of the answer; a property the device could not read carries
// its Err.
func DecodeReadPropertyMultipleAck(b []byte) ([]PropertyValue, error) {
	var out []PropertyValue
	off := 0
	for off < len(b) {
		c, n, err := expectContext(b[off:], 0)
		if err != nil || len(c) != 4 {
			return nil, fmt.Errorf("bacnet: ReadPropertyMultiple ack object: %w", errOr(err, "length"))
		}
		obj := objectIDFromRaw(binary.BigEndian.Uint32(c))
		off += n
		if n, err = expectBracket(b[off:], 1, true); err != nil {
			return nil, fmt.Errorf("bacnet: ReadPropertyMultiple ack %s: %w", obj, err)
		}
		off += n
		for {
			if t, n, err := DecodeTag(b[off:]); err == nil && t.Closing && t.Context && t.Number == 1 {
				off += n
				break
			}
			pv, n, err := decodeResult(b[off:], obj)
			if err != nil {
				return nil, fmt.Errorf("bacnet: ReadPropertyMultiple ack %s: %w", obj, err)
			}
			out = append(out, pv)
			off += n
		}
	}
	return out, nil
}

// decodeResult reads one property result of an RPM ack: the reference,
// then [4] values or [5] an error.
func decodeResult(b []byte, obj ObjectID) (PropertyValue, int, error) {
	pv := PropertyValue{Object: obj}
	ref, off, err := decodeRef(b, 2, 3)
	if err != nil {
		return pv, 0, err
	}
	pv.Ref = ref
	t, n, err := DecodeTag(b[off:])
	if err != nil {
		return pv, 0, err
	}
	if !t.Opening || (t.Number != 4 && t.Number != 5) {
		return pv, 0, fmt.Errorf("%s: want opening tag 4 or 5, got %s", ref.ID, t)
	}
	off += n
	if t.Number == 4 {
		vals, n, err := DecodeValues(b[off:], 4)
		if err != nil {
			return pv, 0, fmt.Errorf("%s: %w", ref.ID, err)
		}
		pv.Values, off = vals, off+n
	} else {
		class, code, m, err := decodeErrorPair(b[off:])
		if err != nil {
			return pv, 0, fmt.Errorf("%s: %w", ref.ID, err)
		}
		pv.Err, off = &Error{Class: class, Code: code}, off+m
	}
	n, err = expectBracket(b[off:], t.Number, false)
	if err != nil {
		return pv, 0, fmt.Errorf("%s: %w", ref.ID, err)
	}
	return pv, off + n, nil
}

// AppendWriteProperty writes a WriteProperty request of one value with a
// priority 1..16 (0 leaves the priority out).
func AppendWriteProperty(dst []byte, obj ObjectID, ref PropertyRef, value any, priority uint8) ([]byte, error) {
	dst = AppendReadProperty(dst, obj, ref)
	dst = AppendOpening(dst, 3)
	dst, err := AppendApp(dst, value)
	if err != nil {
		return nil, err
	}
	dst = AppendClosing(dst, 3)
	if priority > 0 {
		dst = AppendContextUnsigned(dst, 4, uint64(priority))
	}
	return dst, nil
}

// WriteRequest is a decoded WriteProperty request.
type WriteRequest struct {
	Object   ObjectID
	Ref      PropertyRef
	Values   []any
	Priority uint8
}

// DecodeWriteProperty decodes a WriteProperty request, as a device
// receives it.
func DecodeWriteProperty(b []byte) (WriteRequest, error) {
	pv, off, err := decodeObjectValue(b)
	if err != nil {
		return WriteRequest{}, fmt.Errorf("bacnet: WriteProperty: %w", err)
	}
	w := WriteRequest{Object: pv.Object, Ref: pv.Ref, Values: pv.Values}
	if off < len(b) {
		c, n, err := expectContext(b[off:], 4)
		if err != nil {
			return w, err
		}
		p, err := decodeUnsigned(c)
		if err != nil || p < 1 || p > 16 {
			return w, fmt.Errorf("bacnet: WriteProperty priority: %w", errOr(err, "value"))
		}
		w.Priority, off = uint8(p), off+n
	}
	if off != len(b) {
		return w, errors.New("bacnet: trailing bytes after WriteProperty")
	}
	return w, nil
}

// Message is one datagram decoded down to its APDU.
type Message struct {
	BVLC BVLC
	NPDU NPDU
	APDU APDU
	// HasAPDU is false for BVLC-only messages (Result, Register-Foreign-
	// Device) and network layer messages.
	HasAPDU bool
}

// Decode decodes a BACnet/IP datagram through BVLC, NPDU and APDU header.
// Service payloads are left to the service decoders.
func Decode(b []byte) (Message, error) {
	var m Message
	var err error
	if m.BVLC, err = DecodeBVLC(b); err != nil {
		return m, err
	}
	if m.BVLC.NPDU == nil && m.BVLC.Function != BVLCOriginalUnicastNPDU && m.BVLC.Function != BVLCOriginalBroadcastNPDU &&
		m.BVLC.Function != BVLCForwardedNPDU && m.BVLC.Function != BVLCDistributeBroadcastToNetwork {
		return m, nil
	}
	if m.NPDU, err = DecodeNPDU(m.BVLC.NPDU); err != nil {
		return m, err
	}
	if m.NPDU.NetworkMessage {
		return m, nil
	}
	if m.APDU, err = DecodeAPDU(m.NPDU.APDU); err != nil {
		return m, err
	}
	m.HasAPDU = true
	return m, nil
}
