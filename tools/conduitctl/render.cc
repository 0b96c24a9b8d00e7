#include "render.h"

#include <cstdio>
#include <vector>

#include "common/json.h"

namespace conduit {
namespace {

std::string Cell(const Json* v) {
  if (v == nullptr || v->is_null()) return "-";
  if (v->is_string()) return v->as_string();
  return v->Dump();
}

// Left-aligned columns sized to their widest cell.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

// A field of an object; "a.b" descends into nested objects.
const Json* Field(const Json& item, const std::string& path) {
  const Json* cur = &item;
  size_t start = 0;
  while (cur != nullptr && cur->is_object()) {
    size_t dot = path.find('.', start);
    cur = cur->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
  return nullptr;
}

std::string Rows(const Json& list, const std::vector<std::string>& fields) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& item : list.items()) {
    std::vector<std::string> row;
    for (const auto& f : fields) row.push_back(Cell(Field(item, f)));
    rows.push_back(std::move(row));
  }
  return Table(fields, rows);
}

}  // namespace

std::string RenderBody(Render how, const std::string& body) {
  if (how == Render::kText) return body;
  Json doc;
  if (!Json::Parse(body, &doc).ok()) return body;
  const char* list_name = nullptr;
  std::vector<std::string> fields;
  switch (how) {
    case Render::kPrograms:
      list_name = "programs";
      fields = {"connection", "pid", "uid", "exe", "service", "since_unix_s"};
      break;
    case Render::kComms:
      list_name = "communicators";
      fields = {"key",         "nranks", "this_host", "local_ranks", "config.epoch", "config.ring",
                "collectives", "bytes",  "errors",    "failure"};
      break;
    case Render::kTrace:
      list_name = "trace";
      fields = {"seq", "epoch", "ring", "op", "dtype", "count", "bytes", "algorithm", "duration_us", "error"};
      break;
    case Render::kRoutes:
      list_name = "routes";
      fields = {"method", "path", "access"};
      break;
    case Render::kPaths:
      list_name = "paths";
      fields = {"group", "path", "connections", "load"};
      break;
    default:
      return doc.Dump(2) + "\n";
  }
  const Json* list = doc.find(list_name);
  if (list == nullptr || !list->is_array()) return doc.Dump(2) + "\n";
  return Rows(*list, fields);
}

std::string ErrorText(const HttpResponse& response) {
  Json doc;
  const Json* err = nullptr;
  if (Json::Parse(response.body, &doc).ok() && doc.is_object()) err = doc.find("error");
  if (err == nullptr || !err->is_object()) return "HTTP " + std::to_string(response.status) + ": " + response.body;
  return Cell(err->find("status")) + " (" + std::to_string(response.status) + "): " + Cell(err->find("message"));
}

}  // namespace conduit
