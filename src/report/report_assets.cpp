#include "report_assets.h"

namespace frugal::report {

const char* const kPageStyle = R"CSS(
body{font-family:sans-serif;margin:0 24px 24px;max-width:1400px;color:#222}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 0;z-index:2}
header h1{font-size:18px;margin:6px 0}
.runs{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px}
.runs .swatch{display:inline-block;width:14px;height:10px;margin-right:5px}
.runs .diff{color:#555}
.controls{font-size:13px;margin-top:4px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
figure{margin:14px 0;position:relative}figcaption{font-weight:bold;font-size:14px}
svg.chart{width:100%;height:auto}svg.chart text.tick{font-size:11px;fill:#444}svg.chart text.band-label{font-size:9px;fill:#444}
.chart-legend{font-size:12px;display:flex;flex-wrap:wrap;gap:2px 14px}
.chart-legend svg{vertical-align:middle;margin-right:4px}
.logtoggle:checked~.lin{display:none}.logtoggle:not(:checked)~.log{display:none}
label{font-size:12px}
#hover{position:absolute;pointer-events:none;background:rgba(255,255,255,.95);border:1px solid #999;
 font-size:12px;padding:3px 6px;display:none;white-space:pre;z-index:3}
pre{background:#f4f4f4;padding:8px;font-size:12px;overflow-x:auto}
)CSS";

const char* const kPageScript = R"JS(
(function () {
  function ema(v, w) {
    var last = 0, n = 0, out = [];
    for (var i = 0; i < v.length; i++) {
      if (!isFinite(v[i])) { out.push(v[i]); continue; }
      last = last * w + (1 - w) * v[i]; n++;
      out.push(w > 0 ? last / (1 - Math.pow(w, n)) : v[i]);
    }
    return out;
  }
  function nums(s) { return s ? s.split(' ').map(Number) : []; }
  function mapper(svg) {
    var d = svg.dataset, x0 = +d.x0, x1 = +d.x1, y0 = +d.y0, y1 = +d.y1, log = d.log === '1';
    return {
      px: function (x) { return +d.left + (x - x0) / (x1 - x0) * (d.right - d.left); },
      py: function (y) {
        var f = log ? (Math.log(y) - Math.log(y0)) / (Math.log(y1) - Math.log(y0)) : (y - y0) / (y1 - y0);
        return +d.bottom - f * (d.bottom - d.top);
      },
      ok: function (y) { return isFinite(y) && (!log || y > 0); }
    };
  }
  function smooth(w) {
    document.querySelectorAll('svg.smooth').forEach(function (svg) {
      var m = mapper(svg);
      svg.querySelectorAll('polyline.data:not(.nosmooth)').forEach(function (pl) {
        var xs = nums(pl.dataset.xv), s = ema(nums(pl.dataset.v), w), pts = [];
        for (var i = 0; i < xs.length; i++) {
          if (m.ok(s[i])) pts.push(m.px(xs[i]).toFixed(1) + ',' + m.py(s[i]).toFixed(1));
        }
        pl.setAttribute('points', pts.join(' '));
      });
      svg.querySelectorAll('polyline.raw').forEach(function (pl) {
        pl.style.display = w > 0 ? '' : 'none';
      });
    });
  }
  var slider = document.getElementById('smoothing');
  var shown = document.getElementById('smoothing-value');
  function apply() { shown.textContent = (+slider.value).toFixed(2); smooth(+slider.value); }
  if (slider) { slider.addEventListener('input', apply); apply(); }

  var box = document.getElementById('hover');
  function fmt(v) { return Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : +v.toPrecision(4) + ''; }
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var m = mapper(svg), d = svg.dataset;
    var guide = document.createElementNS('http://www.w3.org/2000/svg', 'line');
    guide.setAttribute('stroke', '#555'); guide.setAttribute('stroke-dasharray', '2 2');
    guide.setAttribute('y1', d.top); guide.setAttribute('y2', d.bottom); guide.style.display = 'none';
    svg.appendChild(guide);
    svg.addEventListener('mouseleave', function () { box.style.display = 'none'; guide.style.display = 'none'; });
    svg.addEventListener('mousemove', function (ev) {
      var r = svg.getBoundingClientRect(), px = (ev.clientX - r.left) * (svg.viewBox.baseVal.width / r.width);
      var x = +d.x0 + (px - d.left) / (d.right - d.left) * (d.x1 - d.x0);
      var w = slider && svg.classList.contains('smooth') ? +slider.value : 0;
      var lines = [], at = null;
      svg.querySelectorAll('.data, .area').forEach(function (el) {
        var xs = nums(el.dataset.xv), v = nums(el.dataset.v);
        if (!xs.length) return;
        var best = 0;
        for (var i = 1; i < xs.length; i++) if (Math.abs(xs[i] - x) < Math.abs(xs[best] - x)) best = i;
        if (at === null || Math.abs(xs[best] - x) < Math.abs(at - x)) at = xs[best];
        var text = el.dataset.label + ': ' + fmt(v[best]) + ' ' + d.yunit;
        if (w > 0 && el.classList.contains('data') && !el.classList.contains('nosmooth')) {
          text += '  (smoothed ' + fmt(ema(v, w)[best]) + ')';
        }
        lines.push(text);
      });
      if (at === null) return;
      guide.setAttribute('x1', m.px(at)); guide.setAttribute('x2', m.px(at)); guide.style.display = '';
      box.textContent = d.xunit + ' ' + fmt(at) + '\n' + lines.join('\n');
      box.style.display = 'block';
      box.style.left = (ev.pageX + 14) + 'px'; box.style.top = (ev.pageY + 10) + 'px';
    });
  });
})();
)JS";

}  // namespace frugal::report
