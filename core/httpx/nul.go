package httpx

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// PostgreSQL's text and jsonb types cannot hold U+0000: a string carrying
// one fails deep in a statement and used to surface as a 500. Refusing it
// at the edge, naming the field, turns that into the client's 400 for
// every handler at once instead of a check in each.

// escapedNUL is how U+0000 appears in valid JSON: encoding/json refuses a
// raw NUL byte inside a string as a syntax error already.
var escapedNUL = []byte(`\u0000`)

// nulError names the JSON path of a string that holds U+0000.
type nulError struct{ path string }

func (e *nulError) Error() string {
	return "body: " + e.path + " contains a NUL character (U+0000), which is not allowed"
}

// checkNUL returns a *nulError for the first string of body (an object
// key or a value, at any depth) that contains U+0000. A body without the
// escape is passed at the cost of one byte search; only one that has it
// (or has the literal text \\u0000) is walked. Syntax errors are left to
// the decoder, which words them.
func checkNUL(body []byte) error {
	if !bytes.Contains(body, escapedNUL) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := nulWalker{}
	for {
		tok, err := dec.Token()
		if err != nil {
			// io.EOF, or a syntax error the decoder will word.
			return nil
		}
		if err := w.token(tok); err != nil {
			return err
		}
	}
}

// nulWalker follows the decoder's tokens and keeps the path to the current
// value, as in "tags.location" or "readings[2].agentUuid".
type nulWalker struct {
	stack []frame
}

type frame struct {
	object  bool
	wantKey bool   // object: the next string token is a key
	key     string // object: the current member
	index   int    // array: the current element
}

func (w *nulWalker) path() string {
	var b strings.Builder
	for _, f := range w.stack {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() == 0 {
		return "the document"
	}
	return b.String()
}

// valueDone moves the enclosing container past the value just read.
func (w *nulWalker) valueDone() {
	if n := len(w.stack); n > 0 {
		f := &w.stack[n-1]
		if f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
}

func (w *nulWalker) token(tok json.Token) error {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			w.stack = append(w.stack, frame{object: true, wantKey: true})
		case '[':
			w.stack = append(w.stack, frame{})
		default:
			w.stack = w.stack[:len(w.stack)-1]
			w.valueDone()
		}
	case string:
		if n := len(w.stack); n > 0 && w.stack[n-1].object && w.stack[n-1].wantKey {
			f := &w.stack[n-1]
			if strings.ContainsRune(v, 0) {
				f.key = ""
				parent := w.path()
				if len(w.stack) == 1 {
					parent = "the top-level object"
				}
				return &nulError{path: "a key of " + strings.TrimSuffix(parent, ".")}
			}
			f.key, f.wantKey = v, false
			return nil
		}
		if strings.ContainsRune(v, 0) {
			return &nulError{path: w.path()}
		}
		w.valueDone()
	default:
		w.valueDone()
	}
	return nil
}

// refuseNULParams answers 400 for a request whose query or path parameters
// contain U+0000, naming the parameter, before any handler passes one to
// the database.
func refuseNULParams(write ErrorWriter) gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, p := range c.Params {
			if strings.IndexByte(p.Value, 0) >= 0 {
				write(c, http.StatusBadRequest, "invalid_parameter",
					"path parameter "+p.Key+" contains a NUL character (U+0000), which is not allowed")
				return
			}
		}
		if q := c.Request.URL.RawQuery; strings.Contains(q, "%00") || strings.IndexByte(q, 0) >= 0 {
			for k, vs := range c.Request.URL.Query() {
				bad := strings.IndexByte(k, 0) >= 0
				for _, v := range vs {
					bad = bad || strings.IndexByte(v, 0) >= 0
				}
				if bad {
					write(c, http.StatusBadRequest, "invalid_parameter",
						"query parameter "+strings.ReplaceAll(k, "\x00", `\u0000`)+" contains a NUL character (U+0000), which is not allowed")
					return
				}
			}
		}
		c.Next()
	}
}
