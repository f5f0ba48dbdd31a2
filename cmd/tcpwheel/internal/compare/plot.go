package compare

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// stackColors keeps a stack's colour the same in both panels.
var stackColors = map[string]color.RGBA{
	stackTcpwheel:    {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	stackTcpwheelRT:  {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	stackGVisor:      {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	stackGVisorWheel: {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	stackGVisorGSO:   {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	stackKernel:      {R: 0x40, G: 0x40, B: 0x40, A: 0xff},
}

// writePlot draws up to three panels side by side: the CDF of RTO slack per
// stack (quiet RTO retransmissions of every case), the median transfer time of
// each case that has one, per stack, and each stack's rate in the real-client
// cases over the kernel's. The format follows path's extension (.svg or .png).
func (rep *report) writePlot(path string, stacks []string) error {
	cdf, cdfData, err := rep.slackCDF(stacks)
	if err != nil {
		return err
	}
	bars, barsData, err := rep.transferBars(stacks)
	if err != nil {
		return err
	}
	// A panel with no data (a run of scenarios without retransmissions, or
	// without transfers) is left out; with neither, the slack panel says so.
	var panels []*plot.Plot
	if cdfData || !barsData {
		panels = append(panels, cdf)
	}
	if barsData {
		panels = append(panels, bars)
	}
	if rates, ok, err := rep.kernelRatios(stacks); err != nil {
		return err
	} else if ok {
		panels = append(panels, rates)
	}
	w, h := vg.Length(len(panels))*14*vg.Centimeter, 11*vg.Centimeter
	var c draw.Canvas
	var save func() error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		sc := vgsvg.New(w, h)
		c = draw.New(sc)
		save = func() error { return writeTo(path, sc.WriteTo) }
	case ".png":
		ic := vgimg.New(w, h)
		c = draw.New(ic)
		save = func() error { return writeTo(path, vgimg.PngCanvas{Canvas: ic}.WriteTo) }
	default:
		return fmt.Errorf("plot %s: the name must end in .svg or .png", path)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, c)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	return save()
}

func writeTo(path string, write func(w io.Writer) (int64, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

// slackCDF is the CDF of quiet RTOs' slack per stack, and whether any stack
// had one.
func (rep *report) slackCDF(stacks []string) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "RTO slack: retransmission gap - RTO (quiet RTOs; left is better)"
	p.X.Label.Text = "slack (ms)"
	p.Y.Label.Text = "fraction of retransmissions"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	some := false
	for _, st := range stacks {
		vs, ok := rep.pooled("rto_slack_ms", st)
		if !ok {
			continue
		}
		some = true
		pts := make(plotter.XYs, 0, 2*len(vs))
		for i, v := range vs {
			pts = append(pts, plotter.XY{X: v, Y: float64(i) / float64(len(vs))})
			pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(len(vs))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, false, err
		}
		l.Color = stackColors[st]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", st, len(vs)), l)
	}
	if !some {
		p.Title.Text += ": no data"
	}
	p.Add(plotter.NewGrid())
	return p, some, nil
}

// transferBars is the median transfer time per case and stack, and whether
// any case had one.
func (rep *report) transferBars(stacks []string) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "transfer time per case (median; lower is better)"
	p.Y.Label.Text = "ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var cases []string
	for _, r := range rep.Summary {
		if r.Metric == "transfer_ms" && !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
	}
	if len(cases) == 0 {
		p.Title.Text += ": no data"
		p.Y.Scale, p.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
		return p, false, nil
	}
	lo, hi, err := scatterByCase(p, stacks, cases, func(c, st string) (float64, bool) {
		r, ok := rep.row(c, "transfer_ms", st)
		return r.Median, ok && r.Median > 0
	})
	if err != nil {
		return nil, false, err
	}
	if lo <= hi {
		p.Y.Min, p.Y.Max = lo/2, hi*4 // room for the legend
	}
	p.Legend.Top = true
	p.NominalX(cases...)
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = draw.XRight
	return p, true, nil
}

// scatterByCase adds a scatter per stack of value(case, stack) over the
// cases, side by side around each case's tick, and returns the range of the
// values.
func scatterByCase(p *plot.Plot, stacks, cases []string, value func(c, st string) (float64, bool)) (lo, hi float64, err error) {
	lo, hi = math.Inf(1), math.Inf(-1)
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}
	for k, st := range stacks {
		var pts plotter.XYs
		for i, c := range cases {
			if v, ok := value(c, st); ok {
				pts = append(pts, plotter.XY{X: float64(i) + 0.15*(float64(k)-float64(len(stacks)-1)/2), Y: v})
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return 0, 0, err
		}
		sc.GlyphStyle.Color = stackColors[st]
		sc.GlyphStyle.Radius = vg.Points(4)
		sc.GlyphStyle.Shape = shapes[k%len(shapes)]
		p.Add(sc)
		p.Legend.Add(st, sc)
	}
	p.Add(plotter.NewGrid())
	p.X.Min, p.X.Max = -0.5, float64(len(cases))-0.5
	return lo, hi, nil
}

// clientRates are the real-client cases and the rate each reports.
var clientRates = []struct{ c, metric string }{
	{"http-down", "mbytes_per_s"}, {"http-up", "mbytes_per_s"}, {"http-par", "mbytes_per_s"},
	{"wrk", "requests_per_s"}, {"ab", "conns_per_s"},
}

// kernelRatios is each stack's median rate over the kernel's in the
// real-client cases, and whether there was any.
func (rep *report) kernelRatios(stacks []string) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "real clients: rate / the kernel loopback's (median; higher is better)"
	p.Y.Label.Text = "× kernel (MB/s, requests/s, connections/s)"
	var cases []string
	metric := map[string]string{}
	for _, cr := range clientRates {
		if _, ok := rep.row(cr.c, cr.metric, stackKernel); ok {
			cases = append(cases, cr.c)
			metric[cr.c] = cr.metric
		}
	}
	if len(cases) == 0 {
		return p, false, nil
	}
	_, hi, err := scatterByCase(p, stacks, cases, func(c, st string) (float64, bool) {
		r, ok := rep.row(c, metric[c], st)
		if !ok || r.VsKernel == nil {
			return 0, false
		}
		return *r.VsKernel, true
	})
	if err != nil {
		return nil, false, err
	}
	p.Y.Min, p.Y.Max = 0, max(hi, 1)*1.45 // room for the legend above the kernel's 1
	p.Legend.Top = true
	p.NominalX(cases...)
	return p, true, nil
}
