#include "sample/schema_formats.h"

#include <map>

namespace autoglm {
namespace {

#define HEX4 "[0-9a-fA-F]{1,4}"
#define DATE                                                                                            \
  "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|" \
  "02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
#define TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define PCHAR "(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
#define LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"

const std::map<std::string, const char*>& formats() {
  static const std::map<std::string, const char*> f = {
      {"date", "^" DATE "$"},
      {"time", "^" TIME "$"},
      {"date-time", "^" DATE "T" TIME "$"},
      {"duration",
       "^P(?:[0-9]+W|(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
       "(?:T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
       "|T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))$"},
      {"email", "^" ATOM "(?:\\." ATOM ")*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\\.)+"
                "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$"},
      {"hostname", "^" LABEL "(?:\\." LABEL ")*\\.?$"},
      {"ipv4", "^" OCTET "(?:\\." OCTET "){3}$"},
      {"ipv6", "^(?:(?:" HEX4 ":){7}" HEX4 "|(?:" HEX4 ":){1,7}:|(?:" HEX4 ":){1,6}:" HEX4 "|(?:" HEX4
               ":){1,5}(?::" HEX4 "){1,2}|(?:" HEX4 ":){1,4}(?::" HEX4 "){1,3}|(?:" HEX4 ":){1,3}(?::" HEX4
               "){1,4}|(?:" HEX4 ":){1,2}(?::" HEX4 "){1,5}|" HEX4 ":(?::" HEX4 "){1,6}|:(?:(?::" HEX4 "){1,7}|:))$"},
      {"uri",
       "^[A-Za-z][A-Za-z0-9+.\\-]*:(?://(?:(?:[A-Za-z0-9\\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*@)?"
       "(?:[A-Za-z0-9\\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*(?::[0-9]*)?(?:/" PCHAR "*)*|/(?:" PCHAR "+(?:/" PCHAR
       "*)*)?|" PCHAR "+(?:/" PCHAR "*)*)(?:\\?(?:" PCHAR "|[/?])*)?(?:#(?:" PCHAR "|[/?])*)?$"},
      {"uuid", "^(?:urn:uuid:)?[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"},
  };
  return f;
}

}  // namespace

const char* format_regex(const std::string& format) {
  auto it = formats().find(format);
  return it == formats().end() ? nullptr : it->second;
}

}  // namespace autoglm
