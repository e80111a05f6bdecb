#pragma once
// Line plots through gnuplot (PNG or SVG by the output's extension): panels stacked
// vertically over one x axis, each with any number of overlaid series.
#include <string>
#include <utility>
#include <vector>

namespace st {

struct PlotSeries {
  std::string title;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool markers_only = false;                      // points without lines (sparse values)
  int color = 0;                     // gnuplot's line colour index; 0: by position in the panel
  bool dashed_with_markers = false;  // a dashed line through marked points
};

struct PlotPanel {
  std::string title, ylabel;
  std::vector<PlotSeries> series;
};

// Writes `out` (.png or .svg) atomically: a failure leaves nothing behind. Needs gnuplot on
// PATH; an InputError says how to get it.
void render_plot(const std::vector<PlotPanel>& panels, const std::string& xlabel,
                 const std::string& out);

// shardtrain plot: loss (and validation loss), tokens/s and peak memory against step, from
// metrics files (`metrics.file` JSON lines), one series per file. The validation records are
// a curve beside the training loss (training.eval_every), or one point (the final validation).
int run_plot(const std::vector<std::string>& metrics_files, const std::string& out);

}  // namespace st
