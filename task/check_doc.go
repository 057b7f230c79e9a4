package task

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
	"golang.org/x/net/html"
)

// Limits on a PDF's text: pages looked at, and text kept.
const (
	maxPDFPages = 2000
	maxDocText  = MaxDocumentRead
)

func describeDoc(c *Check) string { return "document_text " + c.Path }

// documentText is document_text: the document's plain text, paragraphs
// joined by "\n", satisfies contains / matches.
func documentText(ctx context.Context, env Env, c *Check) (bool, string, error) {
	data, err := readDocument(ctx, env, c.Path)
	if err != nil {
		return false, err.Error(), nil
	}
	text, err := bounded(ctx, "document", func() (string, error) { return plainText(ctx, data, c.Path) })
	if err != nil {
		return false, err.Error(), nil
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	return textCheck("document", m, text, "")
}

// plainText extracts a document's text by its file name's extension:
// .odt (and .ods, .odp), .docx, .pdf, .html/.htm; anything else is read as
// plain text (.txt, .md, ...).
func plainText(ctx context.Context, data []byte, path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".odt", ".ods", ".odp", ".fodt":
		content := data
		if ext != ".fodt" {
			var err error
			if content, err = zipMember(data, "content.xml"); err != nil {
				return "", err
			}
		}
		return xmlText(content, odfParagraph, false)
	case ".docx", ".docm":
		content, err := zipMember(data, "word/document.xml")
		if err != nil {
			return "", err
		}
		return xmlText(content, docxParagraph, true)
	case ".pdf":
		return pdfText(ctx, data)
	case ".html", ".htm", ".xhtml":
		return htmlText(data), nil
	default:
		// Plain text. A binary file (a spreadsheet, an image) is no text a
		// person would read; say so rather than match its bytes.
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			return "", fmt.Errorf("is not a text document: document_text reads .odt, .docx, .pdf, .html and plain text files")
		}
		return string(data), nil
	}
}

// xmlRole is what an element of a word processor's XML means for its text.
type xmlRole int

const (
	roleNone      xmlRole = iota
	roleParagraph         // its text is a paragraph
	roleText              // its character data is text (DOCX w:t; ODF text is anywhere in a paragraph)
	roleSpace             // one or more spaces (ODF text:s, text:c of them)
	roleTab
	roleBreak // a line break inside a paragraph
	roleSkip  // not body text: comments, deleted tracked changes
)

func odfParagraph(se xml.StartElement) xmlRole {
	switch se.Name.Space {
	case nsText:
		switch se.Name.Local {
		case "p", "h":
			return roleParagraph
		case "s":
			return roleSpace
		case "tab":
			return roleTab
		case "line-break":
			return roleBreak
		case "tracked-changes", "note-citation", "sequence-decls":
			return roleSkip
		}
	case nsOffice:
		if se.Name.Local == "annotation" || se.Name.Local == "annotation-end" {
			return roleSkip
		}
	}
	return roleNone
}

const nsWord = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

func docxParagraph(se xml.StartElement) xmlRole {
	if se.Name.Space != nsWord {
		return roleNone
	}
	switch se.Name.Local {
	case "p":
		return roleParagraph
	case "t":
		return roleText
	case "tab":
		return roleTab
	case "br", "cr":
		return roleBreak
	case "del", "instrText", "delText",
		// Properties: a w:tab there is a tab stop, not a tab.
		"pPr", "rPr", "sectPr", "tblPr", "tcPr", "trPr":
		return roleSkip
	}
	return roleNone
}

// xmlText walks a word processor's XML and returns its paragraphs joined
// by "\n". For ODF all character data inside a paragraph is text; for DOCX
// (textOnlyInT) only that of w:t elements (the rest is markup such as field
// codes).
func xmlText(content []byte, role func(xml.StartElement) xmlRole, textOnlyInT bool) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(content))
	var b strings.Builder
	depth, skip, inPara, inText, paras := 0, 0, 0, 0, 0
	roles := make([]xmlRole, 0, 64)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return "", fmt.Errorf("the document's XML is not well-formed: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > maxXMLDepth {
				return "", fmt.Errorf("the document nests more than %d elements deep", maxXMLDepth)
			}
			r := role(t)
			roles = append(roles, r)
			if skip > 0 || r == roleSkip {
				skip++
				continue
			}
			switch r {
			case roleParagraph:
				if inPara == 0 && paras > 0 {
					b.WriteByte('\n')
				}
				if inPara == 0 {
					paras++
				}
				inPara++
			case roleText:
				inText++
			case roleSpace:
				n := 1
				for _, a := range t.Attr {
					if a.Name.Local == "c" {
						if c, err := strconv.Atoi(a.Value); err == nil && c > 0 {
							n = min(c, 1000)
						}
					}
				}
				b.WriteString(strings.Repeat(" ", n))
			case roleTab:
				b.WriteByte('\t')
			case roleBreak:
				b.WriteByte('\n')
			}
		case xml.EndElement:
			depth--
			r := roleNone
			if n := len(roles); n > 0 {
				r, roles = roles[n-1], roles[:n-1]
			}
			if skip > 0 {
				skip--
				continue
			}
			switch r {
			case roleParagraph:
				inPara--
			case roleText:
				inText--
			}
		case xml.CharData:
			if skip > 0 || inPara == 0 || (textOnlyInT && inText == 0) {
				continue
			}
			if b.Len()+len(t) > maxDocText {
				return "", fmt.Errorf("the document's text is longer than %d MiB", maxDocText>>20)
			}
			b.Write(t)
		}
	}
}

// pdfText is the text of each page, in order, pages joined by "\n", read
// with github.com/ledongthuc/pdf (kept up, and hardened against malformed
// files: nesting limits, bad streams). ctx is looked at between pages.
func pdfText(ctx context.Context, data []byte) (string, error) {
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("is not a PDF that can be read: %w", err)
	}
	n := r.NumPage()
	if n > maxPDFPages {
		return "", fmt.Errorf("has %d pages, more than the %d a check reads", n, maxPDFPages)
	}
	var b strings.Builder
	budget := int64(MaxUnzipped)
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		// The reader streams a page's content, but keeps all the text it
		// shows and every font's ToUnicode map: a content stream that
		// inflates to gigabytes of "(a) Tj" would keep a parser busy, and
		// growing, long after the check gave up on it. So inflate them
		// first, counting, within the budget.
		if budget, err = pdfStreams(p, budget); err != nil {
			return "", fmt.Errorf("page %d: %w", i, err)
		}
		text, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("page %d: %w", i, err)
		}
		if i > 1 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
		if b.Len() > maxDocText {
			return "", fmt.Errorf("the document's text is longer than %d MiB", maxDocText>>20)
		}
	}
	return b.String(), nil
}

// pdfStreams inflates the page's content streams and its fonts' ToUnicode
// maps, counting their bytes against budget, and returns what is left.
func pdfStreams(p pdf.Page, budget int64) (int64, error) {
	var streams []pdf.Value
	switch c := p.V.Key("Contents"); c.Kind() {
	case pdf.Stream:
		streams = append(streams, c)
	case pdf.Array:
		for j := 0; j < c.Len() && j < 10000; j++ {
			streams = append(streams, c.Index(j))
		}
	}
	for _, name := range p.Fonts() {
		if tu := p.Font(name).V.Key("ToUnicode"); tu.Kind() == pdf.Stream {
			streams = append(streams, tu)
		}
	}
	for _, s := range streams {
		if s.Kind() != pdf.Stream {
			continue
		}
		rc := s.Reader()
		n, err := io.Copy(io.Discard, io.LimitReader(rc, budget+1))
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("a stream cannot be read: %w", err)
		}
		if budget -= n; budget < 0 {
			return 0, fmt.Errorf("its streams inflate to more than %d MiB, more than a check reads", MaxUnzipped>>20)
		}
	}
	return budget, nil
}

// htmlText is the text a browser shows for an HTML page: text outside
// script and style, block elements on lines of their own.
func htmlText(data []byte) string {
	z := html.NewTokenizer(bytes.NewReader(data))
	z.SetMaxBuf(MaxDocumentRead)
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(b.String())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head", "template":
				skip++
			case "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "section", "article", "pre", "blockquote":
				b.WriteByte('\n')
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head", "template":
				if skip > 0 {
					skip--
				}
			case "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "section", "article", "pre", "blockquote":
				b.WriteByte('\n')
			}
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		}
	}
}
