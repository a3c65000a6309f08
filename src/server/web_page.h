// The single-page web interface served at "/": chat (streamed) and speech.
#pragma once

namespace cachet::server {

// A complete HTML document (inline CSS and JavaScript, no external resources).
const char* web_page_html();

}  // namespace cachet::server
