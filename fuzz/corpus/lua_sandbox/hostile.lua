local t = setmetatable({}, {__index = function(t, k) return string.rep('x', 100) .. k end})
for i = 1, 10 do pcall(function() while true do local _ = t[i] end end) end
return string.find(string.rep('a', 50), '.-.-b')
