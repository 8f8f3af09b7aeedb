package opcua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
)

// Browse limits.
const (
	MaxBrowseDepth = 20
	// MaxBrowseNodes caps a browse result; a larger address space is cut
	// and reported as truncated rather than exhausting the agent.
	MaxBrowseNodes = 10000
	// browseBatch is how many nodes one Browse or Read request names.
	browseBatch = 100
)

// BrowseRequest is the body of POST /v1/discover/opcua/browse.
type BrowseRequest struct {
	EndpointURL          string `json:"endpointUrl"`
	MaxDepth             int    `json:"maxDepth,omitempty"`
	SecurityMode         string `json:"securityMode,omitempty"`
	SecurityPolicy       string `json:"securityPolicy,omitempty"`
	CertificateTrustMode string `json:"certificateTrustMode,omitempty"`
	// TrustedCertificates (PEM text or file paths) is needed only with
	// certificateTrustMode trusted-list.
	TrustedCertificates []string `json:"trustedCertificates,omitempty"`
	Username            string   `json:"username,omitempty"`
	Password            string   `json:"password,omitempty"`
	// TimeoutMS bounds connecting and each request; 0 means 5000.
	TimeoutMS int `json:"timeoutMs,omitempty"`
}

// BrowseResult is the answer of a browse.
type BrowseResult struct {
	EndpointURL string        `json:"endpointUrl"`
	Nodes       []*BrowseNode `json:"nodes"`
	NodeCount   int           `json:"nodeCount"`
	Truncated   bool          `json:"truncated,omitempty"`
}

// BrowseNode is one node of the address space below the Objects folder.
type BrowseNode struct {
	NodeID      string        `json:"nodeId"`
	BrowseName  string        `json:"browseName"`
	DisplayName string        `json:"displayName"`
	NodeClass   string        `json:"nodeClass"`
	DataType    string        `json:"dataType,omitempty"`
	Children    []*BrowseNode `json:"children,omitempty"`
}

// Validate checks the request without I/O; problems are *FieldError.
func (r BrowseRequest) Validate() error {
	errs := checkSecurity("", r.EndpointURL, r.SecurityMode, r.SecurityPolicy, r.CertificateTrustMode, r.TrustedCertificates)
	if r.MaxDepth < 0 || r.MaxDepth > MaxBrowseDepth {
		errs = append(errs, adapters.Fieldf("maxDepth", "must be 1 to %d (0 or absent for unlimited)", MaxBrowseDepth))
	}
	if r.Password != "" && r.Username == "" {
		errs = append(errs, adapters.Fieldf("username", "is required with a password"))
	}
	if r.TimeoutMS < 0 || r.TimeoutMS > 600000 {
		errs = append(errs, adapters.Fieldf("timeoutMs", "must be 1 to 600000"))
	}
	return errors.Join(errs...)
}

// Browse connects to the server and walks the hierarchical references from
// the Objects folder (i=85) down, breadth first, one level per round of
// batched Browse requests. A node reached twice is listed once, so
// reference cycles end. Connection errors are wrapped, with a quality code
// adapters.Classify reads.
func Browse(ctx context.Context, req BrowseRequest) (*BrowseResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	timeout := time.Duration(orDefaultInt(req.TimeoutMS, DefaultTimeoutMS)) * time.Millisecond
	sec := newSecurity(req.EndpointURL, req.SecurityMode, req.SecurityPolicy, req.CertificateTrustMode,
		req.TrustedCertificates, "", "", req.Username, req.Password, timeout)
	c, err := dial(ctx, sec)
	if err != nil {
		return nil, fmt.Errorf("browse %s: %w", req.EndpointURL, err)
	}
	defer closeClient(c, timeout)

	b := &browser{c: c, timeout: timeout, seen: map[string]bool{ua.NewNumericNodeID(0, id.ObjectsFolder).String(): true}}
	res := &BrowseResult{EndpointURL: req.EndpointURL, Nodes: []*BrowseNode{}}
	parents := []*ua.NodeID{ua.NewNumericNodeID(0, id.ObjectsFolder)}
	slots := []*[]*BrowseNode{&res.Nodes}
	for depth := 1; len(parents) > 0 && (req.MaxDepth == 0 || depth <= req.MaxDepth); depth++ {
		nextParents, nextSlots, err := b.level(ctx, parents, slots)
		if err != nil {
			return nil, fmt.Errorf("browse %s: %w", req.EndpointURL, err)
		}
		parents, slots = nextParents, nextSlots
		if b.truncated {
			break
		}
	}
	res.NodeCount = b.count
	res.Truncated = b.truncated
	return res, nil
}

type browser struct {
	c         *opcua.Client
	timeout   time.Duration
	seen      map[string]bool
	count     int
	truncated bool
}

// level browses the children of parents; slots[i] receives the children
// of parents[i]. It returns the children to browse next and their slots.
func (b *browser) level(ctx context.Context, parents []*ua.NodeID, slots []*[]*BrowseNode) ([]*ua.NodeID, []*[]*BrowseNode, error) {
	var nextParents []*ua.NodeID
	var nextSlots []*[]*BrowseNode
	var variables []*BrowseNode
	var variableIDs []*ua.NodeID
	for start := 0; start < len(parents); start += browseBatch {
		end := min(start+browseBatch, len(parents))
		refsPerParent, err := b.browse(ctx, parents[start:end])
		if err != nil {
			return nil, nil, err
		}
		for i, refs := range refsPerParent {
			for _, ref := range refs {
				if ref == nil || ref.NodeID == nil || ref.NodeID.ServerIndex != 0 {
					continue // nodes on other servers are out of reach
				}
				nid := ref.NodeID.NodeID
				key := nid.String()
				if b.seen[key] {
					continue
				}
				if b.count >= MaxBrowseNodes {
					b.truncated = true
					return nil, nil, nil
				}
				b.seen[key] = true
				b.count++
				n := &BrowseNode{NodeID: key, NodeClass: nodeClassName(ref.NodeClass)}
				if ref.BrowseName != nil {
					n.BrowseName = qualifiedName(ref.BrowseName)
				}
				if ref.DisplayName != nil {
					n.DisplayName = ref.DisplayName.Text
				}
				slot := slots[start+i]
				*slot = append(*slot, n)
				if ref.NodeClass == ua.NodeClassVariable {
					variables = append(variables, n)
					variableIDs = append(variableIDs, nid)
				}
				nextParents = append(nextParents, nid)
				nextSlots = append(nextSlots, &n.Children)
			}
		}
	}
	if err := b.dataTypes(ctx, variables, variableIDs); err != nil {
		return nil, nil, err
	}
	return nextParents, nextSlots, nil
}

// browse returns the forward hierarchical references of each node,
// following continuation points.
func (b *browser) browse(ctx context.Context, nodes []*ua.NodeID) ([][]*ua.ReferenceDescription, error) {
	req := &ua.BrowseRequest{
		View:                          &ua.ViewDescription{ViewID: ua.NewTwoByteNodeID(0)},
		RequestedMaxReferencesPerNode: 1000,
		NodesToBrowse:                 make([]*ua.BrowseDescription, len(nodes)),
	}
	for i, n := range nodes {
		req.NodesToBrowse[i] = &ua.BrowseDescription{
			NodeID:          n,
			BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, id.HierarchicalReferences),
			IncludeSubtypes: true,
			NodeClassMask:   uint32(ua.NodeClassObject | ua.NodeClassVariable | ua.NodeClassMethod | ua.NodeClassObjectType | ua.NodeClassVariableType | ua.NodeClassReferenceType | ua.NodeClassDataType | ua.NodeClassView),
			ResultMask:      uint32(ua.BrowseResultMaskAll),
		}
	}
	rctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res, err := b.c.Browse(rctx, req)
	if err != nil {
		return nil, classify(fmt.Errorf("browse request: %w", err))
	}
	if len(res.Results) != len(nodes) {
		return nil, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("server answered %d browse results for %d nodes", len(res.Results), len(nodes)))
	}
	out := make([][]*ua.ReferenceDescription, len(nodes))
	for i, r := range res.Results {
		if r == nil || !isGood(r.StatusCode) {
			continue // a node that cannot be browsed is listed without children
		}
		out[i] = r.References
		cp := r.ContinuationPoint
		for len(cp) > 0 && len(out[i]) < MaxBrowseNodes {
			next, err := b.c.BrowseNext(rctx, &ua.BrowseNextRequest{ContinuationPoints: [][]byte{cp}})
			if err != nil {
				return nil, classify(fmt.Errorf("browse next: %w", err))
			}
			if len(next.Results) != 1 || !isGood(next.Results[0].StatusCode) {
				break
			}
			out[i] = append(out[i], next.Results[0].References...)
			cp = next.Results[0].ContinuationPoint
		}
		if len(cp) > 0 {
			// Release the server's continuation point we will not follow.
			_, _ = b.c.BrowseNext(rctx, &ua.BrowseNextRequest{ReleaseContinuationPoints: true, ContinuationPoints: [][]byte{cp}})
		}
	}
	return out, nil
}

// dataTypes reads the DataType attribute of variables in batches.
func (b *browser) dataTypes(ctx context.Context, nodes []*BrowseNode, ids []*ua.NodeID) error {
	for start := 0; start < len(ids); start += browseBatch {
		end := min(start+browseBatch, len(ids))
		req := &ua.ReadRequest{NodesToRead: make([]*ua.ReadValueID, end-start)}
		for i, nid := range ids[start:end] {
			req.NodesToRead[i] = &ua.ReadValueID{NodeID: nid, AttributeID: ua.AttributeIDDataType}
		}
		rctx, cancel := context.WithTimeout(ctx, b.timeout)
		res, err := b.c.Read(rctx, req)
		cancel()
		if err != nil {
			return classify(fmt.Errorf("read data types: %w", err))
		}
		for i, dv := range res.Results {
			if i >= end-start || dv == nil || !isGood(dv.Status) || dv.Value == nil {
				continue
			}
			if nid, ok := dv.Value.Value().(*ua.NodeID); ok {
				nodes[start+i].DataType = dataTypeName(nid)
			}
		}
	}
	return nil
}

// dataTypeName names standard data types ("Double"); others keep their id.
func dataTypeName(n *ua.NodeID) string {
	switch n.Type() {
	case ua.NodeIDTypeTwoByte, ua.NodeIDTypeFourByte, ua.NodeIDTypeNumeric:
		if n.Namespace() == 0 {
			if name := id.Name(n.IntID()); name != "" {
				return name
			}
		}
	}
	return n.String()
}

func nodeClassName(c ua.NodeClass) string {
	switch c {
	case ua.NodeClassObject:
		return "Object"
	case ua.NodeClassVariable:
		return "Variable"
	case ua.NodeClassMethod:
		return "Method"
	case ua.NodeClassObjectType:
		return "ObjectType"
	case ua.NodeClassVariableType:
		return "VariableType"
	case ua.NodeClassReferenceType:
		return "ReferenceType"
	case ua.NodeClassDataType:
		return "DataType"
	case ua.NodeClassView:
		return "View"
	}
	return strconv.Itoa(int(c))
}

func orDefaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
