// Package wire encodes and decodes the small part of BACnet/IP (ASHRAE
// 135 Annex J and clauses 6, 20 and 21) the agent's BACnet adapter needs:
// BVLC framing, the NPDU header, confirmed and unconfirmed APDUs and the
// ReadProperty, ReadPropertyMultiple, WriteProperty, Who-Is and I-Am
// services with their application and context tags.
//
// No maintained Go BACnet library is served by the module proxy, so the
// codec is our own and deliberately narrow. Every decoder takes bytes from
// the network: lengths are checked against what is there before anything
// is sliced or allocated, and a frame that does not fit is an error, never
// a panic. Segmented messages are not reassembled; a segmented answer is
// reported as ErrSegmented (see ../README.md, section Segmentation).
package wire
