// How conduitctl prints an answer: JSON as the daemon sent it, or a table for the lists
// operators read most.
#ifndef CONDUIT_TOOLS_CONDUITCTL_RENDER_H_
#define CONDUIT_TOOLS_CONDUITCTL_RENDER_H_

#include <string>

#include "admin/http.h"

namespace conduit {

enum class Render { kJson, kText, kPrograms, kComms, kTrace, kRoutes, kPaths };

// The text to print for a successful response body (falls back to the JSON itself when the
// body does not have the expected shape).
std::string RenderBody(Render how, const std::string& body);
// "PERMISSION_DENIED (403): only the operator may ..." from an error response.
std::string ErrorText(const HttpResponse& response);

}  // namespace conduit

#endif  // CONDUIT_TOOLS_CONDUITCTL_RENDER_H_
