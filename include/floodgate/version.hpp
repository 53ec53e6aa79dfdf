#pragma once

namespace floodgate {
const char* version();
}
