#include "launch/plot.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/staged_output.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A temporary directory removed with everything in it when this goes out of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "shardtrain-plot-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) fail("cannot create a temporary directory for the plot");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One validation per step, the last record's: the final validation follows a periodic one after
// the same step (the same windows unless training.eval_tokens chose others).
void keep_last_per_step(std::vector<std::pair<double, double>>& points) {
  std::map<double, double> by_step;
  for (const auto& [step, loss] : points) by_step[step] = loss;
  points.assign(by_step.begin(), by_step.end());
}

}  // namespace

void render_plot(const std::vector<PlotPanel>& panels, const std::string& xlabel,
                 const std::string& out) {
  const std::string ext = fs::path(out).extension().string();
  if (ext != ".png" && ext != ".svg") fail_input("plot: --out '{}' must end in .png or .svg", out);
  StagedOutput staged(out, "plot --out");
  staged.check_writable();
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    fail_input("plot: gnuplot is not installed (apt-get install gnuplot-nox)");
  TempDir dir;
  const std::string tmp_out = (dir.path / ("plot" + ext)).string();
  const int height = 300 * int(panels.size()) + 60;
  std::string script = fmt::format(
      "set terminal {} size 900,{} font 'Sans,10'\nset output {}\nset termoption noenhanced\n"
      "set grid\nset key top right\nset multiplot layout {},1\n",
      ext == ".png" ? "pngcairo" : "svg", height, quoted(tmp_out), panels.size());
  int file_index = 0;
  for (const PlotPanel& panel : panels) {
    script += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(panel.title),
                          quoted(xlabel), quoted(panel.ylabel));
    std::vector<std::string> plots;
    for (size_t k = 0; k < panel.series.size(); ++k) {
      const PlotSeries& s = panel.series[k];
      if (s.points.empty()) continue;
      const std::string data = (dir.path / fmt::format("{}.dat", file_index++)).string();
      std::ofstream f(data);
      for (const auto& [x, y] : s.points) f << fmt::format("{} {}\n", x, y);
      const char* style = s.markers_only          ? "points pt 7 ps 1.2"
                          : s.dashed_with_markers ? "linespoints lw 2 dt 2 pt 7 ps 0.8"
                                                  : "lines lw 2";
      plots.push_back(fmt::format("{} using 1:2 with {} lc {} title {}", quoted(data), style,
                                  s.color ? size_t(s.color) : k + 1, quoted(s.title)));
    }
    if (plots.empty()) {  // keep the layout: an empty panel says so
      script +=
          "set label 1 'no data' at graph 0.5,0.5 center\nplot [0:1][0:1] NaN notitle\n"
          "unset label 1\n";
      continue;
    }
    script += "plot ";
    for (size_t i = 0; i < plots.size(); ++i) script += (i ? ", \\\n     " : "") + plots[i];
    script += "\n";
  }
  script += "unset multiplot\nset output\n";
  const std::string script_path = (dir.path / "plot.gp").string();
  write_text_file(script_path, script);
  const std::string log = (dir.path / "gnuplot.log").string();
  const int rc =
      std::system(fmt::format("gnuplot {} > {} 2>&1", quoted(script_path), quoted(log)).c_str());
  if (rc != 0 || !fs::exists(tmp_out))
    fail("plot: gnuplot failed (exit {}): {}", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
         read_text_file(log));
  // gnuplot exits 0 even when its write failed (a full disk, a file-size limit): only an image
  // that ends as its format does is committed.
  const std::string image = read_text_file(tmp_out);
  const bool whole = ext == ".png" ? image.size() >= 12 && image.ends_with("IEND\xae\x42\x60\x82")
                                   : image.find("</svg>") != std::string::npos;
  if (!whole)
    fail(
        "plot: gnuplot wrote an incomplete {} image of {} bytes (a full disk or a file-size "
        "limit?); '{}' is left as it was",
        ext.substr(1), image.size(), out);
  write_output_text(staged, image);
}

int run_plot(const std::vector<std::string>& files, const std::string& out) {
  if (files.empty()) fail_input("plot: give one or more metrics files (metrics.file's JSON lines)");
  if (out.empty()) fail_input("plot: --out FILE.png|FILE.svg is required");
  PlotPanel loss{"Loss", "loss", {}}, speed{"Throughput", "tokens/s", {}},
      memory{"Peak RSS (largest rank)", "MiB", {}};
  for (const std::string& path : files) {
    std::ifstream in(path);
    if (!in) fail_input("plot: cannot open '{}'", path);
    const std::string name = fs::path(path).stem().string();
    const int color = int(loss.series.size() / 2) + 1;  // one colour per run, in every panel
    PlotSeries train{name, {}, false, color}, val{name + " (validation)", {}, true, color},
        tokens{name, {}, false, color}, rss{name, {}, false, color};
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        fail_input("plot: '{}' line {} is not JSON (is it a metrics.file?)", path, line_no);
      }
      auto number = [&](const char* key) {
        if (!j.contains(key) || !j[key].is_number())
          fail_input("plot: '{}' line {}: '{}' is missing or not a number", path, line_no, key);
        return j[key].get<double>();
      };
      if (j.contains("val_loss")) {
        if (j["val_loss"].is_number())
          val.points.emplace_back(number("after_step"), number("val_loss"));
      } else if (j.contains("step")) {
        const double step = number("step") + 1;  // steps are counted from 0 in the file
        train.points.emplace_back(step, number("loss"));
        tokens.points.emplace_back(step, number("tokens_per_s"));
        rss.points.emplace_back(step, number("peak_rss_mib"));
      }
    }
    if (train.points.empty()) fail_input("plot: '{}' holds no training steps", path);
    keep_last_per_step(val.points);
    // Several validations (training.eval_every) are a curve; the final one alone a point.
    val.markers_only = val.points.size() < 2;
    val.dashed_with_markers = !val.markers_only;
    loss.series.push_back(std::move(train));
    loss.series.push_back(std::move(val));
    speed.series.push_back(std::move(tokens));
    memory.series.push_back(std::move(rss));
  }
  render_plot({loss, speed, memory}, "step", out);
  fmt::print("plot: {} ({} run{})\n", out, files.size(), files.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace st
